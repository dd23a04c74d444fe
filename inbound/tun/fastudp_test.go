package tun

import (
	"bytes"
	"net/netip"
	"testing"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/checksum"
	"gvisor.dev/gvisor/pkg/tcpip/header"
)

// udpPacket builds an IP packet of one UDP datagram src -> dst carrying
// payload, with its checksums computed.
func udpPacket(src, dst netip.AddrPort, payload []byte) []byte {
	buf := make([]byte, packetOffset+udpHeaders+len(payload))
	copy(buf[packetOffset+udpHeaders:], payload)
	p, ok := buildUDP(buf, src, dst, len(payload), 65535)
	if !ok {
		panic("udpPacket: cannot build")
	}
	return p[packetOffset:]
}

func TestPlainUDP(t *testing.T) {
	src4, dst4 := netip.MustParseAddrPort("172.19.0.1:40000"), netip.MustParseAddrPort("198.51.100.1:53")
	src6, dst6 := netip.MustParseAddrPort("[fdfe:dcba:9876::1]:40000"), netip.MustParseAddrPort("[2001:db8::1]:443")
	payload := []byte("hello")
	for _, c := range []struct {
		name      string
		p         []byte
		validated bool
		plain     bool
	}{
		{"ipv4", udpPacket(src4, dst4, payload), false, true},
		{"ipv6", udpPacket(src6, dst6, payload), false, true},
		{"ipv4 without checksum", withUDPSum(udpPacket(src4, dst4, payload), 20, 0), false, true},
		{"ipv6 without checksum", withUDPSum(udpPacket(src6, dst6, payload), 40, 0), false, false},
		{"bad checksum", withUDPSum(udpPacket(src4, dst4, payload), 20, 0x1234), false, false},
		{"bad checksum, trusted", withUDPSum(udpPacket(src4, dst4, payload), 20, 0x1234), true, true},
		{"more fragments", withIPv4(udpPacket(src4, dst4, payload), func(ip header.IPv4) { ip.SetFlagsFragmentOffset(header.IPv4FlagMoreFragments, 0) }), false, false},
		{"a later fragment", withIPv4(udpPacket(src4, dst4, payload), func(ip header.IPv4) { ip.SetFlagsFragmentOffset(0, 8) }), false, false},
		{"bad IP checksum", withIPv4(udpPacket(src4, dst4, payload), func(ip header.IPv4) { ip.SetChecksum(ip.Checksum() + 1) }), true, false},
		{"padded", append(udpPacket(src4, dst4, payload), 0), false, false},
		{"UDP length disagrees", withUDPLength(udpPacket(src4, dst4, payload), 20), false, false},
		{"TCP", withIPv4(udpPacket(src4, dst4, payload), func(ip header.IPv4) { ip[9] = 6 }), true, false},
		{"multicast source", udpPacket(netip.MustParseAddrPort("224.0.0.251:5353"), dst4, payload), false, false},
		{"unspecified source", udpPacket(netip.MustParseAddrPort("0.0.0.0:68"), dst4, payload), false, false},
		{"truncated", udpPacket(src4, dst4, payload)[:25], true, false},
	} {
		src, dst, got, ok := plainUDP(c.p, c.validated)
		if ok != c.plain {
			t.Errorf("%s: plain %v, want %v", c.name, ok, c.plain)
			continue
		}
		if !ok {
			continue
		}
		wantSrc, wantDst := src4, dst4
		if c.p[0]>>4 == 6 {
			wantSrc, wantDst = src6, dst6
		}
		if src != wantSrc || dst != wantDst || !bytes.Equal(got, payload) {
			t.Errorf("%s: %s -> %s %q", c.name, src, dst, got)
		}
	}
}

// withIPv4 changes p's IPv4 header with fn, then its header checksum
// unless fn set one.
func withIPv4(p []byte, fn func(header.IPv4)) []byte {
	ip := header.IPv4(p)
	before := ip.Checksum()
	fn(ip)
	if ip.Checksum() == before {
		ip.SetChecksum(0)
		ip.SetChecksum(^ip.CalculateChecksum())
	}
	return p
}

func withUDPSum(p []byte, l4 int, sum uint16) []byte {
	header.UDP(p[l4:]).SetChecksum(sum)
	return p
}

func withUDPLength(p []byte, l4 int) []byte {
	u := header.UDP(p[l4:])
	u.SetLength(u.Length() - 1)
	u.SetChecksum(0)
	return p
}

func waitSent(t *testing.T, conn *fakeConnector, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if links := conn.Links(); len(links) == 1 && len(links[0].Sent()) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the association did not send datagram %d", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fragments cuts the IPv4 packet p into fragments whose payload is at most
// size bytes (a multiple of 8).
func fragments(p []byte, size int) [][]byte {
	ip := header.IPv4(p)
	hl := int(ip.HeaderLength())
	data := p[hl:]
	var out [][]byte
	for off := 0; off < len(data); off += size {
		end := min(off+size, len(data))
		f := append(append([]byte(nil), p[:hl]...), data[off:end]...)
		fip := header.IPv4(f)
		var flags uint8
		if end < len(data) {
			flags = header.IPv4FlagMoreFragments
		}
		fip.SetFlagsFragmentOffset(flags, uint16(off))
		fip.SetTotalLength(uint16(len(f)))
		fip.SetChecksum(0)
		fip.SetChecksum(^fip.CalculateChecksum())
		out = append(out, f)
	}
	return out
}

// Any bytes: plainUDP never panics, and a datagram it takes agrees with
// itself (lengths, a checksum that verifies unless trusted).
func FuzzPlainUDP(f *testing.F) {
	f.Add(udpPacket(netip.MustParseAddrPort("172.19.0.1:1"), netip.MustParseAddrPort("198.51.100.1:2"), []byte("x")), false)
	f.Add(udpPacket(netip.MustParseAddrPort("[fdfe::1]:1"), netip.MustParseAddrPort("[2001:db8::1]:2"), []byte("x")), true)
	f.Fuzz(func(t *testing.T, p []byte, validated bool) {
		src, dst, payload, ok := plainUDP(p, validated)
		if !ok {
			return
		}
		l4 := len(p) - len(payload) - header.UDPMinimumSize
		if l4 != header.IPv4MinimumSize && l4 != header.IPv6MinimumSize || !src.IsValid() || !dst.IsValid() {
			t.Fatalf("took %x as %s -> %s", p, src, dst)
		}
		u := header.UDP(p[l4:])
		if int(u.Length()) != len(p)-l4 || u.SourcePort() != src.Port() || u.DestinationPort() != dst.Port() {
			t.Fatalf("took %x with UDP header %x", p, p[l4:l4+8])
		}
		if validated || u.Checksum() == 0 {
			return
		}
		s, d := src.Addr(), dst.Addr()
		if l4 == header.IPv6MinimumSize {
			s, d = netip.AddrFrom16(s.As16()), netip.AddrFrom16(d.As16())
		}
		xsum := header.PseudoHeaderChecksum(header.UDPProtocolNumber, tcpip.AddrFromSlice(s.AsSlice()), tcpip.AddrFromSlice(d.AsSlice()), u.Length())
		if checksum.Checksum(p[l4:], xsum) != 0xffff {
			t.Fatalf("took %x with a bad checksum", p)
		}
	})
}
