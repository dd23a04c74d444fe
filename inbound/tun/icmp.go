package tun

import (
	"context"
	"net/netip"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// echoTimeout bounds one relayed echo: ping's own default wait.
const echoTimeout = 10 * time.Second

// echo takes p when it is an ICMP echo request (and reports so): the stack
// would answer it for any address, as if every destination replied. The
// request goes to Config.Ping, which relays it when the destination routes
// direct; any other route (a proxy has no ICMP, block refuses) gets an
// unreachable: administratively prohibited.
func (in *Inbound) echo(p []byte) bool {
	src, dst, body, ok := parseEcho(p)
	if !ok {
		return false
	}
	if in.cfg.Ping == nil {
		in.unreachable(p, src, dst)
		return true
	}
	select {
	case in.icmp <- struct{}{}:
	default:
		return true // too many in flight: lost, as on a busy link
	}
	if !in.begin() {
		<-in.icmp
		return true
	}
	orig := append([]byte(nil), p...)
	req := append([]byte(nil), body...)
	go func() {
		defer in.wg.Done()
		defer func() { <-in.icmp }()
		ctx, cancel := context.WithTimeout(in.ctx, echoTimeout)
		defer cancel()
		data, direct, err := in.cfg.Ping.Echo(ctx, src, dst, req[header.ICMPv4MinimumSize:])
		switch {
		case !direct:
			in.unreachable(orig, src, dst)
		case err == nil:
			in.writePacket(buildICMP(dst, src, echoReplyType(dst), 0, req[4:8], data, in.cfg.MTU))
		}
	}()
	return true
}

// parseEcho recognises an unfragmented ICMP echo request (v4 or v6); body
// is its ICMP message.
func parseEcho(p []byte) (src, dst netip.Addr, body []byte, ok bool) {
	if len(p) == 0 {
		return
	}
	switch p[0] >> 4 {
	case 4:
		ip := header.IPv4(p)
		if !ip.IsValid(len(p)) || ip.Protocol() != uint8(header.ICMPv4ProtocolNumber) || ip.More() || ip.FragmentOffset() != 0 {
			return
		}
		body = ip.Payload()
		if len(body) < header.ICMPv4MinimumSize || header.ICMPv4(body).Type() != header.ICMPv4Echo {
			return
		}
		src, _ = netip.AddrFromSlice(ip.SourceAddressSlice())
		dst, _ = netip.AddrFromSlice(ip.DestinationAddressSlice())
	case 6:
		ip := header.IPv6(p)
		if !ip.IsValid(len(p)) || ip.NextHeader() != uint8(header.ICMPv6ProtocolNumber) {
			return
		}
		body = ip.Payload()
		if len(body) < header.ICMPv6EchoMinimumSize || header.ICMPv6(body).Type() != header.ICMPv6EchoRequest {
			return
		}
		src, _ = netip.AddrFromSlice(ip.SourceAddressSlice())
		dst, _ = netip.AddrFromSlice(ip.DestinationAddressSlice())
	default:
		return
	}
	if dst.IsMulticast() || !dst.IsValid() {
		return netip.Addr{}, netip.Addr{}, nil, false
	}
	return src, dst, body, true
}

func echoReplyType(a netip.Addr) uint8 {
	if a.Is4() {
		return uint8(header.ICMPv4EchoReply)
	}
	return uint8(header.ICMPv6EchoReply)
}

// unreachable answers orig (from src to dst) with "administratively
// prohibited", quoting as much of it as the message may carry.
func (in *Inbound) unreachable(orig []byte, src, dst netip.Addr) {
	quote := orig
	typ, code := uint8(header.ICMPv4DstUnreachable), uint8(header.ICMPv4HostProhibited)
	limit := header.IPv4MinimumSize + 8 + 512
	if dst.Is6() {
		typ, code = uint8(header.ICMPv6DstUnreachable), uint8(header.ICMPv6Prohibited)
		limit = header.IPv6MinimumMTU - header.IPv6MinimumSize - header.ICMPv6MinimumSize
	}
	if len(quote) > limit {
		quote = quote[:limit]
	}
	in.writePacket(buildICMP(dst, src, typ, code, make([]byte, 4), quote, in.cfg.MTU))
}

// buildICMP is an ICMP packet from -> to of type and code, its second word
// rest and its data, cut to mtu, with packetOffset bytes of headroom.
func buildICMP(from, to netip.Addr, typ, code uint8, rest, data []byte, mtu int) []byte {
	hlen := header.IPv4MinimumSize
	if to.Is6() {
		hlen = header.IPv6MinimumSize
	}
	if max := mtu - hlen - 8; len(data) > max {
		data = data[:max]
	}
	buf := make([]byte, packetOffset+hlen+8+len(data))
	pkt := buf[packetOffset:]
	msg := pkt[hlen:]
	msg[0], msg[1] = typ, code
	copy(msg[4:8], rest)
	copy(msg[8:], data)
	s, d := tcpip.AddrFromSlice(from.AsSlice()), tcpip.AddrFromSlice(to.AsSlice())
	if hlen == header.IPv4MinimumSize {
		ip := header.IPv4(pkt)
		ip.Encode(&header.IPv4Fields{
			TotalLength: uint16(len(pkt)), ID: uint16(ipID.Add(1)), TTL: 64,
			Protocol: uint8(header.ICMPv4ProtocolNumber), SrcAddr: s, DstAddr: d,
		})
		ip.SetChecksum(^ip.CalculateChecksum())
		header.ICMPv4(msg).SetChecksum(^checksum.Checksum(msg, 0))
		return buf
	}
	header.IPv6(pkt).Encode(&header.IPv6Fields{
		PayloadLength: uint16(len(msg)), TransportProtocol: header.ICMPv6ProtocolNumber, HopLimit: 64,
		SrcAddr: s, DstAddr: d,
	})
	h := header.ICMPv6(msg)
	h.SetChecksum(header.ICMPv6Checksum(header.ICMPv6ChecksumParams{Header: h, Src: s, Dst: d}))
	return buf
}
