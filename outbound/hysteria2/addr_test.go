package hysteria2

import (
	"net/netip"
	"testing"

	"switchyard/netx"
)

func TestParseAuthority(t *testing.T) {
	cases := []struct {
		in   string
		want netx.Addr
		ok   bool
	}{
		{"127.0.0.1:53", netx.Addr{IP: netip.MustParseAddr("127.0.0.1"), Port: 53}, true},
		{"[2001:db8::1]:443", netx.Addr{IP: netip.MustParseAddr("2001:db8::1"), Port: 443}, true},
		{"[::ffff:10.0.0.1]:80", netx.Addr{IP: netip.MustParseAddr("10.0.0.1"), Port: 80}, true},
		{"example.com:8080", netx.DomainAddr("example.com", 8080), true},
		{"127.0.0.1:0", netx.Addr{}, false},
		{"example.com:0", netx.Addr{}, false},
		{"127.0.0.1", netx.Addr{}, false},
		{"127.0.0.1:65536", netx.Addr{}, false},
		{":53", netx.Addr{}, false},
		{"not an address", netx.Addr{}, false},
		{"[fe80::1%eth0]:53", netx.Addr{}, false},
		{"", netx.Addr{}, false},
	}
	for _, tc := range cases {
		got, ok := parseAuthority(tc.in)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseAuthority(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestAuthorityFormatsOncePerPeer(t *testing.T) {
	var names authorities
	peers := []netx.Addr{
		{IP: netip.MustParseAddr("192.0.2.7"), Port: 53},
		{IP: netip.MustParseAddr("2001:db8::7"), Port: 443},
		netx.DomainAddr("example.com", 80),
	}
	want := []string{"192.0.2.7:53", "[2001:db8::7]:443", "example.com:80"}
	for i, p := range peers {
		if got := names.format(p); got != want[i] {
			t.Fatalf("format(%v) = %q, want %q", p, got, want[i])
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		for _, p := range peers {
			names.format(p)
		}
	})
	if allocs != 0 {
		t.Fatalf("formatting known peers allocates %.1f times", allocs)
	}
	for i := range 2 * maxAuthorities {
		names.format(netx.Addr{IP: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), Port: 1})
	}
	if len(names.m) > maxAuthorities {
		t.Fatalf("the cache holds %d entries, cap %d", len(names.m), maxAuthorities)
	}
}

func TestUDPHeaderSize(t *testing.T) {
	// session 4, packet 2, fragment ID and count 1+1, varint length, address
	if got := udpHeaderSize("1.2.3.4:5"); got != 8+1+9 {
		t.Fatalf("udpHeaderSize = %d", got)
	}
	long := make([]byte, 64)
	if got := udpHeaderSize(string(long)); got != 8+2+64 {
		t.Fatalf("a 64-byte address: udpHeaderSize = %d", got)
	}
}
