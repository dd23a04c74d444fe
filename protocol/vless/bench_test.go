package vless

import "testing"

// benchPayload is one UDP packet's payload in the benchmarks.
const benchPayload = 1400

// BenchmarkAppendPacket frames one UDP packet of a single-target link per
// op (its length and the payload) into a staging buffer that is reused; it
// shows 0 allocs/op.
func BenchmarkAppendPacket(b *testing.B) {
	payload := make([]byte, benchPayload)
	stage := make([]byte, 0, PacketHeaderLen+benchPayload)
	appendOne := func() {
		if _, err := AppendPacket(stage[:0], payload); err != nil {
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
}

// BenchmarkOpenPacket sizes one UDP packet per op and takes its payload,
// as a reader does; it shows 0 allocs/op.
func BenchmarkOpenPacket(b *testing.B) {
	pkt, err := AppendPacket(nil, make([]byte, benchPayload))
	if err != nil {
		b.Fatal(err)
	}
	open := func() {
		n, err := PacketLen(pkt)
		if err != nil || n != len(pkt) || len(pkt[PacketHeaderLen:n]) != benchPayload {
			b.Fatalf("packet of %d bytes sized %d: %v", len(pkt), n, err)
		}
	}
	open()
	b.ReportAllocs()
	b.SetBytes(benchPayload)
	b.ResetTimer()
	for b.Loop() {
		open()
	}
}
