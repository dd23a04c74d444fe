package trojan

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"switchyard/netx"
)

// Address types of the SOCKS5-style address: the type, the address, then
// the port.
const (
	AddrIPv4   = 0x01
	AddrDomain = 0x03
	AddrIPv6   = 0x04
)

// MaxAddrLen is the longest encoded address: the type, a length byte, a
// 255-byte name and the port.
const MaxAddrLen = 1 + 1 + 255 + 2

// ErrAddrType is the error of an address type other than the three above.
var ErrAddrType = errors.New("unknown address type")

// AppendAddr appends a. An address with no host, or a name longer than 255
// bytes, cannot be written.
func AppendAddr(dst []byte, a netx.Addr) ([]byte, error) {
	switch {
	case a.IP.IsValid():
		ip := a.IP.Unmap()
		if ip.Is4() {
			b := ip.As4()
			dst = append(append(dst, AddrIPv4), b[:]...)
		} else {
			b := ip.As16()
			dst = append(append(dst, AddrIPv6), b[:]...)
		}
	case a.Name == "":
		return dst, errors.New("trojan: address has no host")
	case len(a.Name) > 255:
		return dst, fmt.Errorf("trojan: domain name of %d bytes is longer than 255", len(a.Name))
	default:
		dst = append(dst, AddrDomain, byte(len(a.Name)))
		dst = append(dst, a.Name...)
	}
	return binary.BigEndian.AppendUint16(dst, a.Port), nil
}

// addrLen returns how many bytes the address at the start of b takes, or,
// when b is too short to tell, more than len(b).
func addrLen(b []byte) (int, error) {
	if len(b) < 1 {
		return 1, nil
	}
	switch b[0] {
	case AddrIPv4:
		return 1 + 4 + 2, nil
	case AddrIPv6:
		return 1 + 16 + 2, nil
	case AddrDomain:
		if len(b) < 2 {
			return 2, nil
		}
		if b[1] == 0 {
			return 0, errors.New("trojan: empty domain name")
		}
		return 1 + 1 + int(b[1]) + 2, nil
	}
	return 0, fmt.Errorf("trojan: %w %#02x", ErrAddrType, b[0])
}

// parseAddr decodes the address that is exactly b (as sized by addrLen).
func parseAddr(b []byte, names *nameCache) (netx.Addr, error) {
	port := binary.BigEndian.Uint16(b[len(b)-2:])
	switch b[0] {
	case AddrIPv4:
		return netx.Addr{IP: netip.AddrFrom4([4]byte(b[1:5])), Port: port}, nil
	case AddrIPv6:
		return netx.Addr{IP: netip.AddrFrom16([16]byte(b[1:17])).Unmap(), Port: port}, nil
	}
	raw := b[2 : len(b)-2]
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f {
			return netx.Addr{}, fmt.Errorf("trojan: domain name %q holds byte %#02x", raw, c)
		}
	}
	if ip, ok := ipText(raw); ok {
		return netx.Addr{IP: ip, Port: port}, nil
	}
	return netx.Addr{Name: names.intern(raw), Port: port}, nil
}

// ipText parses an IP literal written as a name. Only names made of hex
// digits, dots and colons are tried, so other names cost no allocation.
func ipText(raw []byte) (netip.Addr, bool) {
	for _, c := range raw {
		switch {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '.', c == ':':
		default:
			return netip.Addr{}, false
		}
	}
	ip, err := netip.ParseAddr(string(raw))
	if err != nil {
		return netip.Addr{}, false
	}
	return ip.Unmap(), true
}

// nameCache holds the last names decoded, so that a packet from one of them
// reuses its string instead of allocating another.
type nameCache struct {
	names [4]string
	next  uint8
}

func (c *nameCache) intern(raw []byte) string {
	for _, s := range c.names {
		if s == string(raw) {
			return s
		}
	}
	s := string(raw)
	c.names[c.next] = s
	c.next = (c.next + 1) % uint8(len(c.names))
	return s
}
