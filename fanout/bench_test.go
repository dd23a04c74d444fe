package fanout_test

import (
	"testing"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// BenchmarkWritePacket routes and sends one packet on an open sub-link, the
// steady state of an association.
func BenchmarkWritePacket(b *testing.B) {
	cell := new(plane.Cell)
	hole := target("block", 1, &scriptedOutbound{forget: true})
	cell.Store(&plane.Plane{Epoch: 1, Final: target("direct", 1, &scriptedOutbound{forget: true})})
	p := cell.Load()
	for i := range 8 {
		m := mustCompilePort(b, uint16(1000+i))
		p.Rules = append(p.Rules, plane.Rule{Match: m, Target: hole})
	}
	l := fanout.New(cell, assocFlow, track.New(), nil)
	defer l.Close()
	to := netx.AddrFromAddrPort(assocFlow.Src)
	payload := make([]byte, 1200)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := l.WritePacket(payload, to); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReadPacket receives from a sub-link that always has a datagram,
// through the reader's hand-off.
func BenchmarkReadPacket(b *testing.B) {
	busy := &scriptedOutbound{flood: &datagram{payload: string(make([]byte, 1200)), from: netx.DomainAddr("busy.example", 1)}}
	cell := new(plane.Cell)
	cell.Store(&plane.Plane{Epoch: 1, Final: target("busy", 1, busy)})
	l := fanout.New(cell, assocFlow, track.New(), nil)
	defer l.Close()
	if err := l.WritePacket([]byte("go"), netx.DomainAddr("busy.example", 1)); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 2048)
	b.SetBytes(1200)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := l.ReadPacket(buf); err != nil {
			b.Fatal(err)
		}
	}
}
