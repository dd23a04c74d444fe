package mux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"switchyard/netx"
)

// Address types of the port-first address form that Mux.Cool, VLESS and
// VMess share: the port, then the type, then the address.
const (
	AddrIPv4   = 0x01
	AddrDomain = 0x02
	AddrIPv6   = 0x03
)

// MaxAddrLen is the longest encoded address: the port, the type, a length
// byte and a 255-byte name.
const MaxAddrLen = 2 + 1 + 1 + 255

// ErrAddrType is the error of an address type other than the three above.
var ErrAddrType = errors.New("unknown address type")

// AppendAddr appends a in the port-first form. An address with no host, or a
// name longer than 255 bytes, cannot be written.
func AppendAddr(dst []byte, a netx.Addr) ([]byte, error) {
	switch {
	case a.IP.IsValid():
		dst = binary.BigEndian.AppendUint16(dst, a.Port)
		ip := a.IP.Unmap()
		if ip.Is4() {
			b := ip.As4()
			return append(append(dst, AddrIPv4), b[:]...), nil
		}
		b := ip.As16()
		return append(append(dst, AddrIPv6), b[:]...), nil
	case a.Name == "":
		return dst, errors.New("mux: address has no host")
	case len(a.Name) > 255:
		return dst, fmt.Errorf("mux: domain name of %d bytes is longer than 255", len(a.Name))
	}
	dst = binary.BigEndian.AppendUint16(dst, a.Port)
	dst = append(dst, AddrDomain, byte(len(a.Name)))
	return append(dst, a.Name...), nil
}

// AddrLen returns how many bytes the address at the start of b takes. When
// b is too short to tell, the result is larger than len(b): read at least
// that many bytes and ask again.
func AddrLen(b []byte) (int, error) {
	if len(b) < 3 {
		return 3, nil
	}
	switch b[2] {
	case AddrIPv4:
		return 2 + 1 + 4, nil
	case AddrIPv6:
		return 2 + 1 + 16, nil
	case AddrDomain:
		if len(b) < 4 {
			return 4, nil
		}
		if b[3] == 0 {
			return 0, errors.New("mux: empty domain name")
		}
		return 2 + 1 + 1 + int(b[3]), nil
	}
	return 0, fmt.Errorf("mux: %w %#02x", ErrAddrType, b[2])
}

// ParseAddr decodes the address at the start of b and returns it with the
// number of bytes it took.
func ParseAddr(b []byte) (netx.Addr, int, error) {
	return parseAddr(b, nil)
}

func parseAddr(b []byte, names *nameCache) (netx.Addr, int, error) {
	n, err := AddrLen(b)
	if err != nil {
		return netx.Addr{}, 0, err
	}
	if n > len(b) {
		return netx.Addr{}, 0, fmt.Errorf("mux: address of %d bytes cut at %d", n, len(b))
	}
	port := binary.BigEndian.Uint16(b)
	switch b[2] {
	case AddrIPv4:
		return netx.Addr{IP: netip.AddrFrom4([4]byte(b[3:7])), Port: port}, n, nil
	case AddrIPv6:
		return netx.Addr{IP: netip.AddrFrom16([16]byte(b[3:19])).Unmap(), Port: port}, n, nil
	}
	raw := b[4:n]
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f {
			return netx.Addr{}, 0, fmt.Errorf("mux: domain name %q holds byte %#02x", raw, c)
		}
	}
	if ip, ok := ipText(raw); ok {
		return netx.Addr{IP: ip, Port: port}, n, nil
	}
	return netx.Addr{Name: names.intern(raw), Port: port}, n, nil
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

// nameCache holds the last names decoded, so that a frame naming one of them
// reuses its string instead of allocating another.
type nameCache struct {
	names [4]string
	next  uint8
}

// intern returns raw as a string; a nil cache always allocates.
func (c *nameCache) intern(raw []byte) string {
	if c == nil {
		return string(raw)
	}
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
