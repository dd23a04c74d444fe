package fanout_test

import (
	"errors"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
	"switchyard/track"
)

// coldHealth reads every node alive; the nodes in measured have a TCP
// average.
type coldHealth struct{ measured map[health.NodeID]bool }

func (coldHealth) Alive(health.NodeID, health.Domain, netx.Family) bool { return true }
func (coldHealth) UDPEligible(health.NodeID, netx.Family) bool          { return true }
func (coldHealth) HasUDPState(health.NodeID, netx.Family) bool          { return false }
func (h coldHealth) Latency(id health.NodeID, d health.Domain, _ netx.Family) (time.Duration, bool) {
	if d == health.TCP && h.measured[id] {
		return 50 * time.Millisecond, true
	}
	return 0, false
}
func (coldHealth) URLLatency(string, string) (time.Duration, bool) { return 0, false }
func (coldHealth) URLAlive(string, string) bool                    { return true }
func (coldHealth) Strikes(health.NodeID) int                       { return 0 }
func (coldHealth) Epoch() uint64                                   { return 0 }
func (coldHealth) Selected(string)                                 {}

// coldAssoc is an association routed to a URLTest group "auto" over dead
// (its opens fail), up and spare (both answer), in that order; packets to
// port direct (unless 0) go to up itself.
func coldAssoc(t *testing.T, direct uint16, measured ...string) (l *fanout.Link, tr *track.Tracker, rep *pathReports, outs map[string]*scriptedOutbound) {
	t.Helper()
	echo := func(p []byte, to netx.Addr) []datagram { return []datagram{{payload: "re:" + string(p), from: to}} }
	outs = map[string]*scriptedOutbound{
		"dead":  {openErr: errors.New("connection refused")},
		"up":    {replies: echo},
		"spare": {replies: echo},
	}
	h := coldHealth{measured: map[health.NodeID]bool{}}
	leaves := map[string]group.Leaf{}
	p := &plane.Plane{Epoch: 1, Targets: map[string]*plane.Target{}}
	for tag, o := range outs {
		lt := nodeTarget(tag, tag[0], o)
		leaves[tag] = group.Leaf{Tag: tag, Node: lt.Node(), Target: lt, UDP: true}
		p.Targets[tag] = lt
	}
	for _, tag := range measured {
		h.measured[leaves[tag].Node] = true
	}
	m, _, err := group.New([]spec.Group{{Tag: "auto", Policy: "urltest", Members: []string{"dead", "up", "spare"}}}, nil, leaves, nil, group.Options{Health: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	p.Final = m.Target("auto")
	p.Targets["auto"] = p.Final
	if direct != 0 {
		p.Rules = []plane.Rule{{Match: mustCompilePort(t, direct), Target: p.Targets["up"]}}
	}
	cell := new(plane.Cell)
	cell.Store(p)
	tr, rep = track.New(), &pathReports{}
	l = fanout.NewReporting(cell, assocFlow, tr, nil, rep)
	t.Cleanup(func() { l.Close() })
	return l, tr, rep, outs
}

// An unmeasured URLTest group prepares its leaves at once for the first
// packet: the dead first pick is counted failed, the next answers, and
// the association keeps that leaf for its next packets rather than
// opening the dead one again.
func TestAColdURLTestAssociationIsAnsweredByTheFirstLeafThatOpens(t *testing.T) {
	l, tr, rep, outs := coldAssoc(t, 0)
	replies := pushed(l)
	for i, dst := range []string{"a.example", "b.example", "c.example"} {
		if err := l.WritePacket([]byte("hi"), netx.DomainAddr(dst, 53)); err != nil {
			t.Fatal(err)
		}
		replied(t, replies, i)
	}
	if d, u := outs["dead"].dials.Load(), outs["up"].dials.Load(); d != 1 || u != 1 {
		t.Fatalf("dead opened %d times, up %d: want once each", d, u)
	}
	rep.wait(t, "d-", "u+")
	flows := tr.Flows()
	if len(flows) != 1 || flows[0].Outbound != "up@v1" || !equalChain(flows[0].Chain, "auto", "up") {
		t.Fatalf("flows %+v, want one on up@v1 through auto", flows)
	}
}

// A group with a measurement takes no such path: its one pick is dialed,
// as any authoritative plan is.
func TestAMeasuredURLTestOpensItsPickAlone(t *testing.T) {
	l, _, rep, outs := coldAssoc(t, 0, "dead")
	if err := l.WritePacket([]byte("hi"), netx.DomainAddr("a.example", 53)); err != nil {
		t.Fatal(err)
	}
	rep.wait(t, "d-")
	if u, s := outs["up"].dials.Load(), outs["spare"].dials.Load(); u != 0 || s != 0 {
		t.Fatalf("up opened %d times, spare %d: the measured pick is authoritative", u, s)
	}
}

// When the association already has a sub-link on the leaf the preparation
// chose (opened by another route), the prepared link is closed and the
// packets go on that sub-link, which the group's packets then keep.
func TestAColdWinnerTheAssociationAlreadyUsesJoinsItsSubLink(t *testing.T) {
	l, tr, _, outs := coldAssoc(t, 99)
	replies := pushed(l)
	l.WritePacket([]byte("hi"), netx.DomainAddr("a.example", 99))
	replied(t, replies, 0)
	for i := 1; i < 3; i++ {
		l.WritePacket([]byte("hi"), netx.DomainAddr("b.example", 53))
		replied(t, replies, i)
	}
	if d, u := outs["dead"].dials.Load(), outs["up"].dials.Load(); d != 1 || u != 2 {
		t.Fatalf("dead opened %d times, up %d: want 1 and 2 (the direct route's, the preparation's)", d, u)
	}
	if links := outs["up"].opened(); links[1].closes.Load() == 0 || links[0].closes.Load() != 0 {
		t.Fatal("the prepared duplicate was kept, or the association's sub-link closed")
	}
	if flows := tr.Flows(); len(flows) != 1 || flows[0].Outbound != "up@v1" {
		t.Fatalf("flows %+v, want the one on up@v1", flows)
	}
}

// pushed hands the link's replies to a channel.
func pushed(l *fanout.Link) chan string {
	replies := make(chan string, 8)
	l.PushPackets(func(p []byte, _ netx.Addr) { replies <- string(p) })
	return replies
}

func replied(t *testing.T, replies chan string, i int) {
	t.Helper()
	select {
	case got := <-replies:
		if got != "re:hi" {
			t.Fatalf("packet %d: reply %q", i, got)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("packet %d: no reply", i)
	}
}

func equalChain(got []string, want ...string) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
