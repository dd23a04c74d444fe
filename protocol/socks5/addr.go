package socks5

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"

	"switchyard/netx"
)

// maxAddrLen is the longest encoded address: ATYP, a length byte, a 255-byte
// name and the port.
const maxAddrLen = 1 + 1 + 255 + 2

// MaxUDPHeaderLen is the longest SOCKS5 UDP header: RSV, FRAG and the
// longest address. A buffer of MaxUDPHeaderLen plus the payload's length
// holds any datagram AppendUDP encodes.
const MaxUDPHeaderLen = 3 + maxAddrLen

// CheckAddr reports whether a can be written in a request, a reply or a UDP
// header: an IP, or a name of 1 to 255 bytes.
func CheckAddr(a netx.Addr) error {
	switch {
	case a.IP.IsValid():
		return nil
	case a.Name == "":
		return fmt.Errorf("socks5: address has no host")
	case len(a.Name) > 255:
		return fmt.Errorf("socks5: domain name of %d bytes is longer than 255", len(a.Name))
	}
	return nil
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
		if len(a.Name) > 255 {
			return dst, false
		}
		dst = append(dst, AtypDomain, byte(len(a.Name)))
		dst = append(dst, a.Name...)
	default:
		dst = append(dst, AtypIPv4, 0, 0, 0, 0)
	}
	return binary.BigEndian.AppendUint16(dst, a.Port), true
}

// addrLen returns how many bytes the address starting with atyp at b[0]
// takes (ATYP and port included), or 0 with an error for an unknown type,
// or need > len(b) when b is too short to tell.
func addrLen(b []byte) (need int, err error) {
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

// parseAddr decodes an address whose encoding is exactly b (as sized by
// addrLen). names, when not nil, supplies a string equal to a name already
// seen so that no new one is allocated.
func parseAddr(b []byte, names *nameCache) (netx.Addr, error) {
	port := binary.BigEndian.Uint16(b[len(b)-2:])
	switch b[0] {
	case AtypIPv4:
		return netx.Addr{IP: netip.AddrFrom4([4]byte(b[1:5])), Port: port}, nil
	case AtypIPv6:
		ip := netip.AddrFrom16([16]byte(b[1:17])).Unmap()
		return netx.Addr{IP: ip, Port: port}, nil
	}
	raw := b[2 : len(b)-2]
	if err := checkName(raw); err != nil {
		return netx.Addr{}, err
	}
	if ip, ok := parseIPText(raw); ok {
		// Clients that leave resolution to the server may still name an
		// IP in text; routing wants it as an IP.
		return netx.Addr{IP: ip, Port: port}, nil
	}
	var name string
	if names != nil {
		name = names.intern(raw)
	} else {
		name = string(raw)
	}
	return netx.Addr{Name: name, Port: port}, nil
}

// checkName refuses names no resolver could use: control bytes, spaces and
// bytes outside ASCII (international names travel in punycode).
func checkName(raw []byte) error {
	for _, c := range raw {
		if c <= ' ' || c >= 0x7f {
			return fmt.Errorf("socks5: domain name %q holds byte %#02x", raw, c)
		}
	}
	return nil
}

// parseIPText parses an IP literal written as a name. Only names made of hex
// digits, dots and colons are tried, so other names cost no allocation.
func parseIPText(raw []byte) (netip.Addr, bool) {
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

// readAddr reads ATYP, the address and the port from r.
func readAddr(r io.Reader) (netx.Addr, error) {
	var buf [maxAddrLen]byte
	have := 0
	for {
		need, err := addrLen(buf[:have])
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
