package supervisor

import (
	"fmt"
	"net"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/relay"
	"switchyard/spec"
)

// nullConn reads and writes whole buffers at once.
type nullConn struct{ net.Conn }

func (nullConn) Read(p []byte) (int, error)  { return len(p), nil }
func (nullConn) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkScoreConnIO is the data path's cost per 16 KiB moved each way
// through a flow's Score wrapper (the byte counters and the throttled
// progress publication; the reports are fakes).
func BenchmarkScoreConnIO(b *testing.B) {
	var q plane.Query
	q.Attempts.Add(&fakeAttempt{}, time.Now())
	sf, _ := beginScore(&q, time.Now())
	c := watchScore(nullConn{}, sf)
	buf := make([]byte, 16<<10)
	b.SetBytes(2 * int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		c.Write(buf)
		c.Read(buf)
	}
}

// BenchmarkScoreFlowReporting is one TCP flow's whole Score reporting with
// the real engine, through a Score group of 8 members: the rank, the
// begin at the dial, set up, the first response, 1 MiB each way in 16 KiB
// reads and writes, and the settlement.
func BenchmarkScoreFlowReporting(b *testing.B) {
	leaves := map[string]group.Leaf{}
	var members []string
	for i := range 8 {
		tag := fmt.Sprintf("n%d", i)
		t := plane.NewTarget(plane.OutboundID{Tag: tag, Version: 1}, dialFunc(nil))
		var id [16]byte
		copy(id[:], tag)
		t.SetNode(id)
		leaves[tag] = group.Leaf{Tag: tag, Node: id, Target: t, UDP: true, Incarnation: 1}
		members = append(members, tag)
	}
	m, _, err := group.New([]spec.Group{{Tag: "smart", Policy: "score", Members: members}}, nil, leaves, nil, group.Options{})
	if err != nil {
		b.Fatal(err)
	}
	target := m.Target("smart")
	dsts := make([]netx.Addr, 32)
	for i := range dsts {
		dsts[i] = netx.DomainAddr(fmt.Sprintf("site%d.example", i), 443)
	}
	buf := make([]byte, 16<<10)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := plane.Query{Network: netx.TCP, Dst: dsts[i%len(dsts)]}
		i++
		if target.Resolve(&q) == nil {
			b.Fatal("no leaf")
		}
		now := time.Now()
		sf, err := beginScore(&q, now)
		if err != nil {
			b.Fatal(err)
		}
		sf.setup(now)
		c := watchScore(nullConn{}, sf)
		for range 64 {
			c.Write(buf)
			c.Read(buf)
		}
		sf.relayEnded(time.Now(), relay.End{By: relay.EndClient})
	}
}
