package shadowsocks

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"switchyard/netx"
)

// Address types of the SOCKS5 address format every Shadowsocks header uses.
const (
	atypIPv4   = 0x01
	atypDomain = 0x03
	atypIPv6   = 0x04
)

// MaxAddrLen is the longest encoded address: type, length, a 255-byte name
// and the port.
const MaxAddrLen = 1 + 1 + 255 + 2

// addrLen returns the encoded length of a, or an error when a cannot be
// written: no host, or a name longer than 255 bytes.
func addrLen(a netx.Addr) (int, error) {
	switch {
	case a.IP.IsValid():
		if a.IP.Unmap().Is4() {
			return 1 + 4 + 2, nil
		}
		return 1 + 16 + 2, nil
	case a.Name == "":
		return 0, errors.New("shadowsocks: the address has no host")
	case len(a.Name) > 255:
		return 0, fmt.Errorf("shadowsocks: a domain name of %d bytes is longer than 255", len(a.Name))
	}
	return 1 + 1 + len(a.Name) + 2, nil
}

// putAddr writes a (checked by addrLen) at the start of b and returns the
// bytes written.
func putAddr(b []byte, a netx.Addr) int {
	n := 0
	switch {
	case a.IP.IsValid():
		ip := a.IP.Unmap()
		if ip.Is4() {
			b[0] = atypIPv4
			v := ip.As4()
			n = 1 + copy(b[1:], v[:])
		} else {
			b[0] = atypIPv6
			v := ip.As16()
			n = 1 + copy(b[1:], v[:])
		}
	default:
		b[0] = atypDomain
		b[1] = byte(len(a.Name))
		n = 2 + copy(b[2:], a.Name)
	}
	binary.BigEndian.PutUint16(b[n:], a.Port)
	return n + 2
}

// parseAddr decodes the address at the start of b and returns it with its
// encoded length.
func parseAddr(b []byte) (netx.Addr, int, error) {
	if len(b) < 1 {
		return netx.Addr{}, 0, errors.New("shadowsocks: address missing")
	}
	var n int
	switch b[0] {
	case atypIPv4:
		n = 1 + 4 + 2
	case atypIPv6:
		n = 1 + 16 + 2
	case atypDomain:
		if len(b) < 2 {
			return netx.Addr{}, 0, errors.New("shadowsocks: address truncated")
		}
		if b[1] == 0 {
			return netx.Addr{}, 0, errors.New("shadowsocks: empty domain name in an address")
		}
		n = 1 + 1 + int(b[1]) + 2
	default:
		return netx.Addr{}, 0, fmt.Errorf("shadowsocks: unknown address type %#02x", b[0])
	}
	if len(b) < n {
		return netx.Addr{}, 0, errors.New("shadowsocks: address truncated")
	}
	port := binary.BigEndian.Uint16(b[n-2:])
	switch b[0] {
	case atypIPv4:
		return netx.Addr{IP: netip.AddrFrom4([4]byte(b[1:5])), Port: port}, n, nil
	case atypIPv6:
		return netx.Addr{IP: netip.AddrFrom16([16]byte(b[1:17])).Unmap(), Port: port}, n, nil
	}
	raw := b[2 : n-2]
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f {
			return netx.Addr{}, 0, fmt.Errorf("shadowsocks: domain name in an address holds byte %#02x", c)
		}
	}
	if ip, err := netip.ParseAddr(string(raw)); err == nil && ip.Zone() == "" {
		return netx.Addr{IP: ip.Unmap(), Port: port}, n, nil
	}
	return netx.Addr{Name: string(raw), Port: port}, n, nil
}
