package mux

import (
	"net/netip"
	"testing"

	"switchyard/netx"
)

// benchPayload is one UDP packet's payload in the benchmarks.
const benchPayload = 1400

// xudpBenchFrames are the XUDP frames of one association: the Keep frames
// that carry every packet after the first, naming an IPv4 peer or a domain,
// and the New frame that opens it with its global ID.
func xudpBenchFrames(payload []byte) []struct {
	name  string
	frame Frame
} {
	v4 := netx.Addr{IP: netip.MustParseAddr("198.51.100.7"), Port: 443}
	named := netx.DomainAddr("quic.example.com", 443)
	return []struct {
		name  string
		frame Frame
	}{
		{"keep-ipv4", Frame{Session: XUDPSession, Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: v4, Data: payload}},
		{"keep-domain", Frame{Session: XUDPSession, Status: StatusKeep, Option: OptionData, Network: NetworkUDP, Target: named, Data: payload}},
		{"new-domain", Frame{Session: XUDPSession, Status: StatusNew, Option: OptionData, Network: NetworkUDP, Target: named, GlobalID: [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, Data: payload}},
	}
}

// BenchmarkXUDPAppendFrame encodes one XUDP packet frame per op into a
// staging buffer that is reused; it shows 0 allocs/op.
func BenchmarkXUDPAppendFrame(b *testing.B) {
	stage := make([]byte, 0, MaxFrameOverhead+benchPayload)
	for _, tc := range xudpBenchFrames(make([]byte, benchPayload)) {
		b.Run(tc.name, func(b *testing.B) {
			appendOne := func() {
				if _, err := AppendFrame(stage[:0], &tc.frame); err != nil {
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

// BenchmarkXUDPParseFrame sizes and decodes one XUDP packet frame per op,
// as a reader does; it shows 0 allocs/op (the parser keeps the name it
// last decoded).
func BenchmarkXUDPParseFrame(b *testing.B) {
	for _, tc := range xudpBenchFrames(make([]byte, benchPayload)) {
		b.Run(tc.name, func(b *testing.B) {
			frame, err := AppendFrame(nil, &tc.frame)
			if err != nil {
				b.Fatal(err)
			}
			var p Parser
			parse := func() {
				n, err := FrameLen(frame)
				if err != nil || n != len(frame) {
					b.Fatalf("frame of %d bytes sized %d: %v", len(frame), n, err)
				}
				f, err := p.Parse(frame[:n])
				if err != nil || f.Target != tc.frame.Target || f.GlobalID != tc.frame.GlobalID || len(f.Data) != benchPayload {
					b.Fatalf("%+v: %v", f.Target, err)
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
