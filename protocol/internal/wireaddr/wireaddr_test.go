package wireaddr

import (
	"net/netip"
	"strings"
	"testing"

	"switchyard/netx"
)

func TestCheck(t *testing.T) {
	for _, a := range []netx.Addr{{IP: netip.MustParseAddr("192.0.2.1")}, netx.DomainAddr("a", 1), netx.DomainAddr(strings.Repeat("n", 255), 1)} {
		if err := Check(a); err != nil {
			t.Errorf("%v: %v", a, err)
		}
	}
	for _, a := range []netx.Addr{{Port: 1}, netx.DomainAddr(strings.Repeat("n", 256), 1)} {
		if err := Check(a); err == nil {
			t.Errorf("%q accepted", a.Name)
		}
	}
}

func TestHost(t *testing.T) {
	var names Names
	for raw, want := range map[string]netx.Addr{
		"example.com":    netx.DomainAddr("example.com", 53),
		"192.0.2.1":      {IP: netip.MustParseAddr("192.0.2.1"), Port: 53},
		"::ffff:1.2.3.4": {IP: netip.MustParseAddr("1.2.3.4"), Port: 53},
		"2001:db8::1":    {IP: netip.MustParseAddr("2001:db8::1"), Port: 53},
		"cafe.de":        netx.DomainAddr("cafe.de", 53),
	} {
		if got, err := Host([]byte(raw), 53, &names); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"a b", "a\x00b", "caf\xc3\xa9.example"} {
		if _, err := Host([]byte(raw), 53, nil); err == nil {
			t.Errorf("%q accepted", raw)
		}
	}
}

// A name decoded again reuses its string; a nil cache allocates.
func TestNamesAllocateNothingForARecentName(t *testing.T) {
	var names Names
	raw := []byte("peer.example")
	Host(raw, 1, &names)
	if n := testing.AllocsPerRun(100, func() { Host(raw, 1, &names) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { Host(raw, 1, nil) }); n != 1 {
		t.Fatalf("%v allocations without a cache", n)
	}
}
