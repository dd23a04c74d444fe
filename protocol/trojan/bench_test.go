package trojan

import (
	"net/netip"
	"testing"

	"switchyard/netx"
)

// benchPeers are the two kinds of peer a UDP packet names: an IPv4 address
// and a domain (the parser keeps the name it last decoded, so a peer named
// again is not allocated).
var benchPeers = []struct {
	name string
	addr netx.Addr
}{
	{"ipv4", netx.Addr{IP: netip.MustParseAddr("198.51.100.7"), Port: 443}},
	{"domain", netx.DomainAddr("quic.example.com", 443)},
}

// benchPayload is one UDP packet's payload in the benchmarks.
const benchPayload = 1400

// BenchmarkAppendPacket frames one UDP packet per op into a staging buffer
// that is reused; it shows 0 allocs/op.
func BenchmarkAppendPacket(b *testing.B) {
	payload := make([]byte, benchPayload)
	stage := make([]byte, 0, PacketHeaderMax+benchPayload)
	for _, peer := range benchPeers {
		b.Run(peer.name, func(b *testing.B) {
			appendOne := func() {
				if _, err := AppendPacket(stage[:0], peer.addr, payload); err != nil {
					b.Fatal(err)
				}
			}
			appendOne()
			b.ReportAllocs()
			b.SetBytes(benchPayload)
			b.ResetTimer()
			for b.Loop() {
				appendOne()
			}
		})
	}
}

// BenchmarkParsePacket sizes and decodes one UDP packet per op, as a
// reader does; it shows 0 allocs/op.
func BenchmarkParsePacket(b *testing.B) {
	for _, peer := range benchPeers {
		b.Run(peer.name, func(b *testing.B) {
			pkt, err := AppendPacket(nil, peer.addr, make([]byte, benchPayload))
			if err != nil {
				b.Fatal(err)
			}
			var p PacketParser
			parse := func() {
				n, err := PacketLen(pkt)
				if err != nil || n != len(pkt) {
					b.Fatalf("packet of %d bytes sized %d: %v", len(pkt), n, err)
				}
				from, payload, err := p.Parse(pkt[:n])
				if err != nil || from != peer.addr || len(payload) != benchPayload {
					b.Fatalf("%v, %d bytes: %v", from, len(payload), err)
				}
			}
			parse() // the parser keeps the peer's name
			b.ReportAllocs()
			b.SetBytes(benchPayload)
			b.ResetTimer()
			for b.Loop() {
				parse()
			}
		})
	}
}
