package mux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"switchyard/netx"
	"switchyard/protocol/internal/wireaddr"
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
const MaxAddrLen = 2 + 1 + 1 + wireaddr.MaxNameLen

// ErrAddrType is the error of an address type other than the three above.
var ErrAddrType = errors.New("unknown address type")

// CheckAddr reports whether a can be written: an IP, or a name of 1 to 255
// bytes.
func CheckAddr(a netx.Addr) error {
	if err := wireaddr.Check(a); err != nil {
		return fmt.Errorf("mux: %w", err)
	}
	return nil
}

// AppendAddr appends a in the port-first form. An address CheckAddr refuses
// appends nothing and returns its error.
func AppendAddr(dst []byte, a netx.Addr) ([]byte, error) {
	if err := CheckAddr(a); err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint16(dst, a.Port)
	if a.IP.IsValid() {
		ip := a.IP.Unmap()
		if ip.Is4() {
			b := ip.As4()
			return append(append(dst, AddrIPv4), b[:]...), nil
		}
		b := ip.As16()
		return append(append(dst, AddrIPv6), b[:]...), nil
	}
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

func parseAddr(b []byte, names *wireaddr.Names) (netx.Addr, int, error) {
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
	a, err := wireaddr.Host(b[4:n], port, names)
	if err != nil {
		return netx.Addr{}, 0, fmt.Errorf("mux: %w", err)
	}
	return a, n, nil
}
