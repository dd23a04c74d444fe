package tun

import (
	"net/netip"
	"sync/atomic"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// udpHeaders is room for the longest IP and UDP headers a reply gets
// (IPv6, no extension header).
const udpHeaders = header.IPv6MinimumSize + header.UDPMinimumSize

// maxUDPPayload is the longest datagram an association reads.
const maxUDPPayload = 65535 - udpHeaders

// ipID numbers the IPv4 datagrams the inbound builds.
var ipID atomic.Uint32

// buildUDP writes the IP and UDP headers of a datagram from -> to in
// front of its payload, which lies at buf[packetOffset+udpHeaders:][:n],
// and returns the packet with packetOffset bytes of headroom. An IPv4
// peer of an IPv6 application comes as its IPv4-mapped address; an IPv6
// peer of an IPv4 application cannot be written, nor a packet over mtu.
func buildUDP(buf []byte, from, to netip.AddrPort, n, mtu int) ([]byte, bool) {
	pkt, hlen, xsum, ok := udpHeaders4or6(buf, from, to, n, n, 1, mtu)
	if !ok {
		return nil, false
	}
	u := header.UDP(pkt[packetOffset+hlen:])
	xsum = checksum.Checksum(u[header.UDPMinimumSize:], xsum)
	cs := ^u.CalculateChecksum(xsum)
	if cs == 0 {
		cs = 0xffff
	}
	u.SetChecksum(cs)
	return pkt, true
}

// buildSegmented writes the headers of one packet that carries segs
// datagrams from -> to at once, their n payload bytes at
// buf[packetOffset+udpHeaders:], each seg bytes long but the last, and
// returns it with packetOffset bytes of headroom and the length of its IP
// header. The kernel cuts it into its datagrams (UDP segmentation
// offload): each gets its own IP header and length, IPv4 identifications
// counting up from the one given here, and the checksum computed over its
// payload from the sum of the pseudo-header left in the UDP header.
// Every datagram has to fit mtu.
func buildSegmented(buf []byte, from, to netip.AddrPort, seg, n, segs, mtu int) ([]byte, int, bool) {
	pkt, hlen, xsum, ok := udpHeaders4or6(buf, from, to, seg, n, segs, mtu)
	if !ok {
		return nil, 0, false
	}
	header.UDP(pkt[packetOffset+hlen:]).SetChecksum(xsum)
	return pkt, hlen, true
}

// udpHeaders4or6 writes the IP and UDP headers for n payload bytes at
// buf[packetOffset+udpHeaders:] and returns the packet with its headroom,
// the IP header's length and the pseudo-header's checksum. seg is the
// longest datagram among the segs the packet carries (seg = n for one),
// which has to fit mtu; IPv4 identifications are taken for segs.
func udpHeaders4or6(buf []byte, from, to netip.AddrPort, seg, n, segs, mtu int) ([]byte, int, uint16, bool) {
	src := from.Addr().Unmap()
	switch {
	case to.Addr().Is6() && src.Is4():
		src = netip.AddrFrom16(src.As16())
	case to.Addr().Is4() && !src.Is4():
		return nil, 0, 0, false
	}
	hlen := header.IPv4MinimumSize
	if to.Addr().Is6() {
		hlen = header.IPv6MinimumSize
	}
	total := hlen + header.UDPMinimumSize + n
	if hlen+header.UDPMinimumSize+seg > mtu || total > 0xffff {
		return nil, 0, 0, false
	}
	start := packetOffset + udpHeaders - header.UDPMinimumSize - hlen
	pkt := buf[start : packetOffset+udpHeaders+n]
	s, d := tcpip.AddrFromSlice(src.AsSlice()), tcpip.AddrFromSlice(to.Addr().AsSlice())
	ulen := uint16(header.UDPMinimumSize + n)
	if hlen == header.IPv4MinimumSize {
		ip := header.IPv4(pkt)
		ip.Encode(&header.IPv4Fields{
			TotalLength: uint16(total), ID: uint16(ipID.Add(uint32(segs)) - uint32(segs) + 1), TTL: 64,
			Protocol: uint8(header.UDPProtocolNumber), SrcAddr: s, DstAddr: d,
		})
		ip.SetChecksum(^ip.CalculateChecksum())
	} else {
		header.IPv6(pkt).Encode(&header.IPv6Fields{
			PayloadLength: ulen, TransportProtocol: header.UDPProtocolNumber, HopLimit: 64,
			SrcAddr: s, DstAddr: d,
		})
	}
	u := header.UDP(pkt[hlen:])
	u.Encode(&header.UDPFields{SrcPort: from.Port(), DstPort: to.Port(), Length: ulen})
	xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, s, d, ulen)
	return buf[start-packetOffset : packetOffset+udpHeaders+n], hlen, xsum, true
}
