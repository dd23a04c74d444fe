package socks5

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"

	"switchyard/netx"
	"switchyard/protocol/internal/wireaddr"
)

// MaxAddrLen is the longest encoded address: ATYP, a length byte, a 255-byte
// name and the port.
const MaxAddrLen = 1 + 1 + wireaddr.MaxNameLen + 2

// MaxUDPHeaderLen is the longest SOCKS5 UDP header: RSV, FRAG and the
// longest address. A buffer of MaxUDPHeaderLen plus the payload's length
// holds any datagram AppendUDP encodes.
const MaxUDPHeaderLen = 3 + MaxAddrLen

// CheckAddr reports whether a can be written in a request, a reply or a UDP
// header: an IP, or a name of 1 to 255 bytes.
func CheckAddr(a netx.Addr) error {
	if err := wireaddr.Check(a); err != nil {
		return fmt.Errorf("socks5: %w", err)
	}
	return nil
}

// AppendAddr appends ATYP, the address and the port: the address format of
// SOCKS5 requests, replies and UDP headers, which other protocols (Trojan,
// Shadowsocks) carry too. An address CheckAddr refuses appends nothing and
// returns its error.
func AppendAddr(dst []byte, a netx.Addr) ([]byte, error) {
	if err := CheckAddr(a); err != nil {
		return dst, err
	}
	out, _ := appendAddr(dst, a)
	return out, nil
}

// appendAddr appends ATYP, the address and the port. An address with no host
// is written as 0.0.0.0 with its port; a name longer than 255 bytes cannot be
// written and ok is false.
func appendAddr(dst []byte, a netx.Addr) (out []byte, ok bool) {
	switch {
	case a.IP.IsValid():
		ip := a.IP.Unmap()
		if ip.Is4() {
			b := ip.As4()
			dst = append(dst, AtypIPv4)
			dst = append(dst, b[:]...)
		} else {
			b := ip.As16()
			dst = append(dst, AtypIPv6)
			dst = append(dst, b[:]...)
		}
	case a.Name != "":
		if len(a.Name) > wireaddr.MaxNameLen {
			return dst, false
		}
		dst = append(dst, AtypDomain, byte(len(a.Name)))
		dst = append(dst, a.Name...)
	default:
		dst = append(dst, AtypIPv4, 0, 0, 0, 0)
	}
	return binary.BigEndian.AppendUint16(dst, a.Port), true
}

// AddrLen returns how many bytes the address at the start of b takes (ATYP
// and port included). When b is too short to tell, the result is larger
// than len(b): read at least that many bytes and ask again. An unknown
// address type is an error that matches ErrAddressTypeNotSupported.
func AddrLen(b []byte) (int, error) {
	if len(b) < 1 {
		return 1, nil
	}
	switch b[0] {
	case AtypIPv4:
		return 1 + 4 + 2, nil
	case AtypIPv6:
		return 1 + 16 + 2, nil
	case AtypDomain:
		if len(b) < 2 {
			return 2, nil
		}
		if b[1] == 0 {
			return 0, fmt.Errorf("socks5: empty domain name")
		}
		return 1 + 1 + int(b[1]) + 2, nil
	}
	return 0, fmt.Errorf("%w: %#02x", ErrAddressTypeNotSupported, b[0])
}

// AddrParser decodes addresses and remembers the last few names it returned,
// so that addresses naming the same peers again allocate nothing. The zero
// value is ready; it is not safe for concurrent use.
type AddrParser struct {
	names wireaddr.Names
}

// Parse decodes the address that is exactly b, as AddrLen sizes it. A name
// that is an IP in text is returned as that IP.
func (p *AddrParser) Parse(b []byte) (netx.Addr, error) {
	n, err := AddrLen(b)
	if err != nil {
		return netx.Addr{}, err
	}
	if n != len(b) {
		return netx.Addr{}, fmt.Errorf("socks5: address of %d bytes given %d", n, len(b))
	}
	return parseAddr(b, &p.names)
}

// parseAddr decodes an address whose encoding is exactly b (as sized by
// AddrLen). names, when not nil, supplies a string equal to a name already
// seen so that no new one is allocated.
func parseAddr(b []byte, names *wireaddr.Names) (netx.Addr, error) {
	port := binary.BigEndian.Uint16(b[len(b)-2:])
	switch b[0] {
	case AtypIPv4:
		return netx.Addr{IP: netip.AddrFrom4([4]byte(b[1:5])), Port: port}, nil
	case AtypIPv6:
		ip := netip.AddrFrom16([16]byte(b[1:17])).Unmap()
		return netx.Addr{IP: ip, Port: port}, nil
	}
	// Clients that leave resolution to the server may still name an IP in
	// text; Host returns it as an IP.
	a, err := wireaddr.Host(b[2:len(b)-2], port, names)
	if err != nil {
		return netx.Addr{}, fmt.Errorf("socks5: %w", err)
	}
	return a, nil
}

// readAddr reads ATYP, the address and the port from r.
func readAddr(r io.Reader) (netx.Addr, error) {
	var buf [MaxAddrLen]byte
	have := 0
	for {
		need, err := AddrLen(buf[:have])
		if err != nil {
			return netx.Addr{}, err
		}
		if need <= have {
			return parseAddr(buf[:need], nil)
		}
		if _, err := io.ReadFull(r, buf[have:need]); err != nil {
			return netx.Addr{}, fmt.Errorf("socks5: read address: %w", noEOF(err))
		}
		have = need
	}
}

// noEOF turns an EOF in the middle of a message into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
