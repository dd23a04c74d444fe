package score_test

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"switchyard/group/score"
	"switchyard/netx"
)

func TestNormalizeTarget(t *testing.T) {
	ap := func(s string) netx.Addr { return netx.AddrFromAddrPort(netip.MustParseAddrPort(s)) }
	for _, c := range []struct {
		in   netx.Addr
		want string
	}{
		{netx.DomainAddr("Example.COM", 443), "example.com:443"},
		{netx.DomainAddr("example.com.", 443), "example.com:443"},
		{netx.DomainAddr("example.com..", 443), "example.com.:443"}, // one trailing dot only
		{netx.DomainAddr("example.com", 80), "example.com:80"},      // the port is kept
		{netx.DomainAddr("ÄBC.example", 1), "Äbc.example:1"},        // ASCII only
		{ap("192.0.2.1:53"), "192.0.2.1:53"},
		{ap("[2001:DB8::1]:443"), "[2001:db8::1]:443"},
		{netx.Addr{}, ""},
	} {
		got, err := score.NormalizeTarget(c.in)
		if err != nil || got != c.want {
			t.Errorf("%+v: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{".", "a\x00b", "a b", "a\tb", strings.Repeat("a", score.MaxNameLen+1)} {
		if _, err := score.NormalizeTarget(netx.DomainAddr(bad, 1)); !errors.Is(err, score.ErrBadTarget) {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := score.NormalizeTarget(netx.DomainAddr(strings.Repeat("a", score.MaxNameLen)+".", 1)); err != nil {
		t.Errorf("a maximal name with its dot: %v", err)
	}
}

// Case and one trailing dot select the same cell; the port and the kind of
// target (a name that looks like an address) do not.
func TestTargetsShareCellsAsNormalized(t *testing.T) {
	h := newHarness(t, 1)
	h.useful(scope(netx.DomainAddr("WWW.Example.com.", 443), 1))
	if v := h.view(scope(netx.DomainAddr("www.example.com", 443), 1)); !v.Exact.Present {
		t.Fatal("case or trailing dot split a target")
	}
	for _, other := range []netx.Addr{
		netx.DomainAddr("www.example.com", 8443),
		netx.DomainAddr("www.example.com..", 443),
	} {
		if v := h.view(scope(other, 1)); v.Exact.Present {
			t.Errorf("%+v shares the cell", other)
		}
	}
	h.useful(scope(netx.DomainAddr("192.0.2.1", 53), 1))
	ip := scope(netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:53")), 1)
	if v := h.view(ip); v.Exact.Present {
		t.Error("a name and an address share a cell")
	}
}

func FuzzNormalizeTarget(f *testing.F) {
	for _, s := range []string{"Example.COM.", "a..", ".", "", "x\x00", "[::1]", "1.2.3.4", "ÄÖ.", strings.Repeat("Z", 260)} {
		f.Add(s, uint16(443))
	}
	f.Fuzz(func(t *testing.T, name string, port uint16) {
		a := netx.DomainAddr(name, port)
		if ip, err := netip.ParseAddr(name); err == nil && port%2 == 0 {
			a = netx.AddrFromAddrPort(netip.AddrPortFrom(ip, port))
		}
		got, err := score.NormalizeTarget(a)
		if err != nil {
			if !errors.Is(err, score.ErrBadTarget) {
				t.Fatalf("%q: untyped error %v", name, err)
			}
			return
		}
		if name == "" {
			if got != "" {
				t.Fatalf("empty name: %q", got)
			}
			return
		}
		if len(got) > score.MaxNameLen+len(":65535")+len("[]%") && a.IsName() {
			t.Fatalf("%q: %d bytes", name, len(got))
		}
		if strings.ContainsAny(got, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") && a.IsName() {
			t.Fatalf("%q: not lowercased: %q", name, got)
		}
		// Normalizing is stable: upper-casing the input and adding
		// one trailing dot select the same target.
		if a.IsName() && !strings.HasSuffix(name, ".") {
			again, err := score.NormalizeTarget(netx.DomainAddr(asciiUpper(name)+".", port))
			if err != nil || again != got {
				t.Fatalf("%q: %q vs %q", name, got, again)
			}
		}
	})
}

func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}
