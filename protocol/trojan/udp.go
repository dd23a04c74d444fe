package trojan

import (
	"encoding/binary"
	"fmt"

	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// PacketHeaderMax is the longest packet header: the longest address, the
// length and CRLF.
const PacketHeaderMax = socks5.MaxAddrLen + 2 + 2

// AppendPacket appends one UDP packet toward (or from) peer.
func AppendPacket(dst []byte, peer netx.Addr, payload []byte) ([]byte, error) {
	if len(payload) > 0xffff {
		return dst, fmt.Errorf("trojan: payload of %d bytes does not fit a packet", len(payload))
	}
	dst, err := socks5.AppendAddr(dst, peer)
	if err != nil {
		return dst, err
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(payload)))
	dst = append(dst, '\r', '\n')
	return append(dst, payload...), nil
}

// PacketLen returns how many bytes the packet at the start of b takes,
// payload included. When b is too short to tell, the result is larger than
// len(b): read at least that many bytes and ask again. An unknown address
// type matches socks5.ErrAddressTypeNotSupported.
func PacketLen(b []byte) (int, error) {
	n, err := socks5.AddrLen(b)
	if err != nil || n+2 > len(b) {
		return n + 2, err
	}
	return n + 2 + 2 + int(binary.BigEndian.Uint16(b[n:])), nil
}

// PacketParser decodes packets. It keeps the last names it decoded, so a
// peer named again costs no allocation; one parser serves one reader.
type PacketParser struct {
	addr socks5.AddrParser
}

// Parse decodes packet, exactly one packet as PacketLen sizes it. The
// payload aliases packet.
func (p *PacketParser) Parse(packet []byte) (peer netx.Addr, payload []byte, err error) {
	n, err := PacketLen(packet)
	if err != nil {
		return netx.Addr{}, nil, err
	}
	if n != len(packet) {
		return netx.Addr{}, nil, fmt.Errorf("trojan: packet of %d bytes given %d", n, len(packet))
	}
	an, _ := socks5.AddrLen(packet)
	if packet[an+2] != '\r' || packet[an+3] != '\n' {
		return netx.Addr{}, nil, fmt.Errorf("trojan: packet header ends in %#02x%02x, not CRLF", packet[an+2], packet[an+3])
	}
	if peer, err = p.addr.Parse(packet[:an]); err != nil {
		return netx.Addr{}, nil, err
	}
	return peer, packet[an+4:], nil
}
