package netx

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
)

type fakeResolver map[string][]netip.Addr

func (f fakeResolver) LookupIP(_ context.Context, host string) ([]netip.Addr, error) {
	return slices.Clone(f[host]), nil
}

func TestStrategies(t *testing.T) {
	v4a, v6a, v4b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.2")
	in := []netip.Addr{v6a, v4a, v4b}
	cases := []struct {
		s    Strategy
		want []netip.Addr
	}{
		{Auto, []netip.Addr{v6a, v4a, v4b}},
		{IPv4Only, []netip.Addr{v4a, v4b}},
		{IPv6Only, []netip.Addr{v6a}},
		{PreferIPv4, []netip.Addr{v4a, v4b, v6a}},
		{PreferIPv6, []netip.Addr{v6a, v4a, v4b}},
	}
	for _, c := range cases {
		got := c.s.Order(slices.Clone(in))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: got %v want %v", c.s, got, c.want)
		}
		back, err := ParseStrategy(c.s.String())
		if err != nil || back != c.s {
			t.Errorf("parse %s: %v %v", c.s, back, err)
		}
	}
	if _, err := ParseStrategy("ipv4"); err == nil {
		t.Error("ipv4 accepted as a strategy")
	}
}

func TestResolveErrors(t *testing.T) {
	r := fakeResolver{"v6.test": {netip.MustParseAddr("2001:db8::1")}, "none.test": nil}
	_, err := Resolve(context.Background(), DomainAddr("v6.test", 443), IPv4Only, r)
	if !errors.Is(err, ErrNoUsableAddress) || err.Error() != "dial: no usable ipv4_only destination address for v6.test:443" {
		t.Fatalf("v6 name under ipv4_only: %v", err)
	}
	_, err = Resolve(context.Background(), DomainAddr("none.test", 443), Auto, r)
	if !errors.Is(err, ErrNotResolved) || err.Error() != "dial: destination did not resolve" {
		t.Fatalf("empty answer: %v", err)
	}
	got, err := Resolve(context.Background(), Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 80}, PreferIPv6, r)
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddrPort("192.0.2.1:80") {
		t.Fatalf("IP destination: %v %v", got, err)
	}
}

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]Addr{
		"127.0.0.1:80":       {IP: netip.MustParseAddr("127.0.0.1"), Port: 80},
		"[::1]:1080":         {IP: netip.MustParseAddr("::1"), Port: 1080},
		"example.com:443":    {Name: "example.com", Port: 443},
		"[::ffff:1.2.3.4]:1": {IP: netip.MustParseAddr("1.2.3.4"), Port: 1},
	} {
		got, err := ParseAddr(in)
		if err != nil || got != want {
			t.Errorf("%s: %+v %v", in, got, err)
		}
		if err == nil && in != "[::ffff:1.2.3.4]:1" && got.String() != in {
			t.Errorf("%s: String() = %s", in, got)
		}
	}
	for _, bad := range []string{"", "host", ":80", "host:99999", "host:x", "a b:1", "[fe80::1%eth0]:1"} {
		if _, err := ParseAddr(bad); !errors.Is(err, ErrBadAddr) {
			t.Errorf("%q accepted: %v", bad, err)
		}
	}
}
