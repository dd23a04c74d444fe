package fanout_test

import (
	"testing"
	"time"

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

// staticAttempt is an attempt that costs nothing: the benchmark measures
// what the fan-out adds for a scored packet.
type staticAttempt struct{}

func (staticAttempt) Begin(time.Time) (plane.Report, error) { return nopReport{}, nil }
func (staticAttempt) Release(time.Time)                     {}

type nopReport struct{}

func (nopReport) Setup(time.Time)                  {}
func (nopReport) Response(time.Time)               {}
func (nopReport) Progress(time.Time, int64, int64) {}
func (nopReport) Settle(time.Time)                 {}
func (nopReport) Fail(time.Time, error)            {}
func (nopReport) Cancel(time.Time)                 {}

// scoredChooser picks leaf and attaches one attempt per level.
type scoredChooser struct {
	leaf   *plane.Target
	levels int
}

func (c scoredChooser) Choose(q *plane.Query) *plane.Target {
	for range c.levels {
		q.Attempts.Add(staticAttempt{}, time.Time{})
	}
	return c.leaf
}

// BenchmarkWritePacketScored is BenchmarkWritePacket through a Score-like
// group of two levels: each packet's attempts are released (its sub-link
// reports on the first packet's), and the sub-link counts the bytes it
// sends for its report.
func BenchmarkWritePacketScored(b *testing.B) {
	cell := new(plane.Cell)
	leaf := target("node", 1, &scriptedOutbound{forget: true})
	cell.Store(&plane.Plane{Epoch: 1, Final: plane.NewChooserTarget(plane.OutboundID{Tag: "score", Version: 1}, scoredChooser{leaf, 2})})
	l := fanout.New(cell, assocFlow, track.New(), nil)
	defer l.Close()
	to := netx.AddrFromAddrPort(assocFlow.Src)
	payload := make([]byte, 1200)
	if err := l.WritePacket(payload, to); err != nil {
		b.Fatal(err)
	}
	l.Settle()
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := l.WritePacket(payload, to); err != nil {
			b.Fatal(err)
		}
	}
}
