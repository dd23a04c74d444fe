package config

import (
	"net/netip"
	"testing"
	"time"

	"switchyard/spec"
)

func TestTUNDefaults(t *testing.T) {
	s, _, err := Parse([]byte(`[[inbounds]]
tag = "tun-in"
type = "tun"
`), "sy.toml")
	if err != nil {
		t.Fatal(err)
	}
	in := s.Inbounds[0]
	want := &spec.TUN{Name: "sy0", MTU: 9000, UDPTimeout: 5 * time.Minute, Addresses: []netip.Prefix{
		netip.MustParsePrefix("172.19.0.1/30"), netip.MustParsePrefix("fdfe:dcba:9876::1/126"),
	}}
	if !spec.Equal(in.TUN, want) || in.MaxUDPAssociations != 4096 || s.Socket.Mark != 0 {
		t.Fatalf("tun %+v, associations %d, mark %d", in.TUN, in.MaxUDPAssociations, s.Socket.Mark)
	}
}

func TestTUNKeys(t *testing.T) {
	s, _, err := Parse([]byte(`[dns]
servers = ["udp://127.0.0.1:53"]

[[inbounds]]
tag = "tun-in"
type = "tun"
name = "sy7"
addresses = ["10.0.85.1/24"]
mtu = 1400
auto_route = true
strict_route = true
route_address = ["0.0.0.0/1", "128.0.0.0/1"]
route_exclude_address = ["192.168.0.0/16"]
udp_timeout = "1m"
sniff = true
max_udp_associations = 10
`), "sy.toml")
	if err != nil {
		t.Fatal(err)
	}
	in := s.Inbounds[0]
	want := &spec.TUN{Name: "sy7", MTU: 1400, UDPTimeout: time.Minute, DNSHijack: true, AutoRoute: true, StrictRoute: true,
		Addresses:    []netip.Prefix{netip.MustParsePrefix("10.0.85.1/24")},
		RouteAddress: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/1"), netip.MustParsePrefix("128.0.0.0/1")},
		RouteExclude: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")},
	}
	if !spec.Equal(in.TUN, want) || !in.Sniff || in.MaxUDPAssociations != 10 {
		t.Fatalf("tun %+v", in.TUN)
	}
	if s.Socket.Mark != defaultTUNMark {
		t.Fatalf("auto_route without a [socket] mark: mark %#x", s.Socket.Mark)
	}
}

func TestTUNErrors(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []want
	}{
		{"listening keys", `[[inbounds]]
tag = "t"
type = "tun"
listen = "127.0.0.1:1"
users = [{ username = "u", password = "p" }]
`, []want{
			{4, "inbounds[0].listen", "a tun inbound has no listen: it takes what the machine routes into its device"},
			{5, "inbounds[0].users", "a tun inbound has no users: it takes what the machine routes into its device"},
		}},
		{"tun keys elsewhere", `[[inbounds]]
tag = "m"
type = "mixed"
listen = "127.0.0.1:1"
mtu = 1500
`, []want{{5, "inbounds[0].mtu", `mtu is a key of type "tun"`}}},
		{"bad values", `[[inbounds]]
tag = "t"
type = "tun"
name = "a/b"
addresses = ["10.0.0.1", "0.0.0.0/8", "x"]
mtu = 1000
strict_route = true
route_address = ["10.0.0.0/8"]
dns_hijack = true
`, []want{
			{4, "inbounds[0].name", `"a/b" is not a device name (1 to 15 bytes, no '/', ':' or space)`},
			{5, "inbounds[0].addresses[1]", "0.0.0.0 cannot be a device address"},
			{5, "inbounds[0].addresses[2]", `"x" is not an address with a prefix length (such as "172.19.0.1/30", "fdfe:dcba:9876::1/126")`},
			{7, "inbounds[0].strict_route", "strict_route blocks what bypasses auto_route's rules: it needs auto_route = true"},
			{8, "inbounds[0].route_address", "routes are installed only with auto_route = true"},
			{9, "inbounds[0].dns_hijack", "dns_hijack needs a [dns] table: its DNS service answers the hijacked queries"},
		}},
		{"two inbounds on one device", `[[inbounds]]
tag = "a"
type = "tun"
[[inbounds]]
tag = "b"
type = "tun"
`, []want{{4, "inbounds[1].name", "device sy0 is already the device of inbounds[0]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.text, tc.want) })
	}
}

// Fake IPs with a tun that hijacks DNS are asked: no warning that nothing
// asks the DNS service.
func TestTUNHijackAsksTheFakeIPs(t *testing.T) {
	_, warns, err := Parse([]byte(`[dns]
servers = ["udp://127.0.0.1:53"]
[dns.fakeip]
ipv4 = "198.18.0.0/15"
[[inbounds]]
tag = "tun-in"
type = "tun"
`), "sy.toml")
	if err != nil || len(warns) != 0 {
		t.Fatalf("%v, warnings %v", err, warns)
	}
}

// auto_route with DNS hijack and a system resolver in [dns] would loop.
func TestTUNSystemResolverLoopRefused(t *testing.T) {
	wantProblems(t, `[dns]
servers = ["system"]
[[inbounds]]
tag = "t"
type = "tun"
auto_route = true
`, []want{{3, "inbounds[0].dns_hijack", "the DNS service asks the system resolver, whose queries would enter the device and be hijacked back into the service: give [dns] servers by address, or set dns_hijack = false"}})
}
