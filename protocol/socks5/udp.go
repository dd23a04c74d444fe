package socks5

import (
	"fmt"

	"switchyard/netx"
	"switchyard/protocol/internal/wireaddr"
)

// ParseUDP decodes a SOCKS5 UDP datagram (RSV FRAG ATYP DST.ADDR DST.PORT
// DATA): the address it names and its payload, which aliases b. RSV must be
// zero; a fragment (FRAG non-zero) gives ErrFragmented. A domain name costs
// one string allocation; UDPParser avoids it for names seen recently.
func ParseUDP(b []byte) (dst netx.Addr, payload []byte, err error) {
	return parseUDP(b, nil)
}

// UDPParser decodes datagrams like ParseUDP and remembers the last few names
// it returned, so that a stream of datagrams to the same named peers
// allocates nothing. The zero value is ready; it is not safe for concurrent
// use.
type UDPParser struct {
	addr AddrParser
}

// Parse is ParseUDP with the parser's name cache.
func (p *UDPParser) Parse(b []byte) (dst netx.Addr, payload []byte, err error) {
	return parseUDP(b, &p.addr.names)
}

func parseUDP(b []byte, names *wireaddr.Names) (netx.Addr, []byte, error) {
	if len(b) < 4 {
		return netx.Addr{}, nil, fmt.Errorf("socks5: datagram of %d bytes is shorter than a header", len(b))
	}
	if b[0] != 0 || b[1] != 0 {
		return netx.Addr{}, nil, fmt.Errorf("socks5: datagram reserved bytes are %#02x%02x, not 0", b[0], b[1])
	}
	if b[2] != 0 {
		return netx.Addr{}, nil, fmt.Errorf("%w: FRAG %d", ErrFragmented, b[2])
	}
	b = b[3:]
	n, err := AddrLen(b)
	if err != nil {
		return netx.Addr{}, nil, err
	}
	if n > len(b) {
		return netx.Addr{}, nil, fmt.Errorf("socks5: datagram header is truncated")
	}
	dst, err := parseAddr(b[:n], names)
	if err != nil {
		return netx.Addr{}, nil, err
	}
	return dst, b[n:], nil
}

// AppendUDP appends a SOCKS5 UDP datagram carrying payload from (or to) the
// address from. It allocates nothing when dst has room for
// MaxUDPHeaderLen+len(payload) bytes. An address that cannot be written (a
// name longer than 255 bytes, see CheckAddr) appends nothing: the result then
// has the length of dst.
func AppendUDP(dst []byte, from netx.Addr, payload []byte) []byte {
	out, ok := appendAddr(append(dst, 0, 0, 0), from)
	if !ok {
		return dst
	}
	return append(out, payload...)
}
