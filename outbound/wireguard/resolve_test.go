package wireguard

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	"switchyard/netx"
)

func TestCandidatesFilterByStrategyAndLocalFamilies(t *testing.T) {
	r := resolverOf(
		"dual.test", "2001:db8::1",
		"dual.test", "192.0.2.1",
		"v4.test", "192.0.2.1",
		"v6.test", "2001:db8::1",
	)
	r.answers["empty.test"] = nil
	v4only, v6only, both := families{v4: true}, families{v6: true}, families{v4: true, v6: true}
	cases := []struct {
		name     string
		strategy netx.Strategy
		fam      families
		dst      string
		want     []string
		err      string
	}{
		{"resolver order", netx.Auto, both, "dual.test:80", []string{"[2001:db8::1]:80", "192.0.2.1:80"}, ""},
		{"prefer_ipv4", netx.PreferIPv4, both, "dual.test:80", []string{"192.0.2.1:80", "[2001:db8::1]:80"}, ""},
		{"local v4 drops v6", netx.Auto, v4only, "dual.test:80", []string{"192.0.2.1:80"}, ""},
		{"local v6 drops v4", netx.PreferIPv4, v6only, "dual.test:80", []string{"[2001:db8::1]:80"}, ""},
		{"an IP destination", netx.Auto, both, "192.0.2.9:53", []string{"192.0.2.9:53"}, ""},
		{"local v4, v6 name", netx.Auto, v4only, "v6.test:443", nil,
			"wireguard: no usable auto destination address for v6.test:443 (local address supports IPv4 only)"},
		{"local v6, v4 name", netx.Auto, v6only, "v4.test:443", nil,
			"wireguard: no usable auto destination address for v4.test:443 (local address supports IPv6 only)"},
		{"local v4, v6 IP", netx.PreferIPv6, v4only, "[2001:db8::5]:443", nil,
			"wireguard: no usable prefer_ipv6 destination address for [2001:db8::5]:443 (local address supports IPv4 only)"},
		{"strategy rules out", netx.IPv6Only, both, "v4.test:443", nil,
			"wireguard: no usable ipv6_only destination address for v4.test:443"},
		{"strategy first, then nothing for the local addresses", netx.IPv4Only, v6only, "dual.test:443", nil,
			"wireguard: no usable ipv4_only destination address for dual.test:443 (local address supports IPv6 only)"},
		{"no answer", netx.Auto, both, "empty.test:1", nil, "wireguard: destination did not resolve"},
	}
	for _, c := range cases {
		res := &resolver{r: r, strategy: c.strategy, families: c.fam}
		got, err := res.candidates(context.Background(), mustAddr(c.dst))
		var texts []string
		for _, a := range got {
			texts = append(texts, a.String())
		}
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("%s: got %v %v, want error %q", c.name, texts, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(texts, c.want) {
			t.Errorf("%s: got %v %v, want %v", c.name, texts, err, c.want)
		}
	}
	if got := r.answers["dual.test"]; got[0] != netip.MustParseAddr("2001:db8::1") {
		t.Fatal("candidates reordered the resolver's own answer")
	}
	failing := &fakeResolver{err: errors.New("server misbehaving")}
	res := &resolver{r: failing, strategy: netx.Auto, families: both}
	if _, err := res.candidates(context.Background(), mustAddr("x.test:1")); err != failing.err {
		t.Fatalf("a resolver error is not passed through unchanged: %v", err)
	}
}

// The local addresses' families rule destinations out on a running tunnel,
// for streams and for datagrams to an IP.
func TestDialsHonourTheLocalFamilies(t *testing.T) {
	keys := newKeyPair(t)
	o := clientSpec(nil, keys)
	o.Addresses = []netip.Prefix{clientV4}
	c := newClient(t, o)
	_, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("v6.test:443")})
	if !errors.Is(err, netx.ErrNoUsableAddress) || err.Error() != "wireguard: no usable auto destination address for v6.test:443 (local address supports IPv4 only)" {
		t.Fatalf("stream: %v", err)
	}
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.WritePacket([]byte("x"), mustAddr("[fd00:7::1]:53"))
	if err == nil || err.Error() != "wireguard: no usable auto destination address for [fd00:7::1]:53 (local address supports IPv4 only)" {
		t.Fatalf("datagram: %v", err)
	}
	if err := l.WritePacket([]byte("x"), mustAddr("v6.test:53")); err != nil {
		t.Fatalf("a datagram to a name with no usable address is dropped, not failed: %v", err)
	}
}
