package tun

import (
	"encoding/binary"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// The plain UDP datagram (IPv4 without options or fragments, IPv6 without
// extension headers, lengths that agree, a checksum that verifies or that
// the kernel left to the offload) goes from the device to its association
// without the stack: the stack would parse the same headers, copy the
// packet into a buffer of its own and find no endpoint of its own for it
// (the inbound binds none), only to hand it to handleUDP. Everything else
// (fragments, options, a bad checksum, a source that cannot be one) goes to
// the stack, which reassembles, or drops and counts, as it always has.

// plainUDP returns the endpoints and the payload (in place) of p, an IP
// packet, when it is a plain UDP datagram; validated is whether its UDP
// checksum is trusted.
func plainUDP(p []byte, validated bool) (src, dst netip.AddrPort, payload []byte, ok bool) {
	var l4 int
	var s, d netip.Addr
	switch {
	case len(p) >= header.IPv4MinimumSize+header.UDPMinimumSize && p[0] == 0x45:
		ip := header.IPv4(p)
		if int(ip.TotalLength()) != len(p) || ip.Protocol() != uint8(header.UDPProtocolNumber) ||
			ip.Flags()&header.IPv4FlagMoreFragments != 0 || ip.FragmentOffset() != 0 || !ip.IsChecksumValid() {
			return
		}
		s, d = netip.AddrFrom4([4]byte(p[12:16])), netip.AddrFrom4([4]byte(p[16:20]))
		if s.IsMulticast() || s == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return
		}
		l4 = header.IPv4MinimumSize
	case len(p) >= header.IPv6MinimumSize+header.UDPMinimumSize && p[0]>>4 == 6:
		ip := header.IPv6(p)
		if int(ip.PayloadLength()) != len(p)-header.IPv6MinimumSize || ip.NextHeader() != uint8(header.UDPProtocolNumber) {
			return
		}
		s, d = netip.AddrFrom16([16]byte(p[8:24])), netip.AddrFrom16([16]byte(p[24:40]))
		if s.IsMulticast() {
			return
		}
		l4 = header.IPv6MinimumSize
	default:
		return
	}
	if s.IsUnspecified() {
		return
	}
	u := header.UDP(p[l4:])
	if int(u.Length()) != len(p)-l4 {
		return
	}
	if !validated {
		sum := binary.BigEndian.Uint16(p[l4+6:])
		if sum == 0 && l4 == header.IPv6MinimumSize {
			return // IPv6 has no datagrams without a checksum
		}
		if sum != 0 {
			xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber,
				tcpip.AddrFromSlice(s.AsSlice()), tcpip.AddrFromSlice(d.AsSlice()), u.Length())
			if checksum.Checksum(p[l4:], xsum) != 0xffff {
				return
			}
		}
	}
	return netip.AddrPortFrom(s.Unmap(), u.SourcePort()), netip.AddrPortFrom(d.Unmap(), u.DestinationPort()),
		p[l4+header.UDPMinimumSize:], true
}

// takePlain hands p, a packet from the device, to its association when it
// is a plain UDP datagram, and reports whether it did.
func (in *Inbound) takePlain(p []byte, validated bool) bool {
	src, dst, payload, ok := plainUDP(p, validated)
	if ok {
		in.datagram(src, dst, payload)
	}
	return ok
}
