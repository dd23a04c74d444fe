package socks5

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"switchyard/netx"
)

// The address codec other protocols carry: every writable address parses
// back, sized byte by byte; what cannot be written or read is refused.
func TestAddrRoundTrip(t *testing.T) {
	var p AddrParser
	for _, a := range []netx.Addr{
		{IP: netip.MustParseAddr("192.0.2.1"), Port: 53},
		{IP: netip.MustParseAddr("2001:db8::1"), Port: 443},
		netx.DomainAddr("example.com", 80),
		netx.DomainAddr(strings.Repeat("n", 255), 65535),
	} {
		b, err := AppendAddr([]byte("pre"), a)
		if err != nil || !bytes.HasPrefix(b, []byte("pre")) {
			t.Fatalf("%v: %v", a, err)
		}
		b = b[3:]
		for i := range b {
			if n, err := AddrLen(b[:i]); err != nil || n <= i {
				t.Fatalf("%v: AddrLen of %d bytes = %d, %v", a, i, n, err)
			}
		}
		if n, err := AddrLen(b); err != nil || n != len(b) || len(b) > MaxAddrLen {
			t.Fatalf("%v: AddrLen = %d, %v; encoded %d", a, n, err, len(b))
		}
		if got, err := p.Parse(b); err != nil || got != a {
			t.Fatalf("%v parsed as %v, %v", a, got, err)
		}
	}
	for _, a := range []netx.Addr{{Port: 1}, netx.DomainAddr(strings.Repeat("n", 256), 1)} {
		if b, err := AppendAddr([]byte("pre"), a); err == nil || string(b) != "pre" {
			t.Errorf("%q written: %q", a.Name, b)
		}
	}
	if _, err := AddrLen([]byte{9}); !errors.Is(err, ErrAddressTypeNotSupported) {
		t.Errorf("address type 9: %v", err)
	}
	for _, bad := range [][]byte{{AtypIPv4, 1, 2, 3, 4, 0}, {AtypDomain, 3, 'a', ' ', 'b', 0, 1}} {
		if a, err := p.Parse(bad); err == nil {
			t.Errorf("% x parsed as %v", bad, a)
		}
	}
}
