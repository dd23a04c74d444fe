package fanout_test

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/track"
)

func TestABlockedPeerGetsNothingAndTheAssociationGoesOn(t *testing.T) {
	allowed, blocked := newEcho(t), newEcho(t)
	direct := target("direct", 1, &udpOutbound{})
	hole := &scriptedOutbound{}
	block := target("block", 1, hole)
	a := newAssoc(t, planeOf(t, 1, direct, byPort{blocked.addr.Port, block}))

	a.send(t, "first", allowed.addr)
	if d := a.reply(t); d.payload != "first" || d.from != allowed.addr {
		t.Fatalf("got %q from %v", d.payload, d.from)
	}
	a.send(t, "blocked", blocked.addr)
	a.send(t, "second", allowed.addr)
	if d := a.reply(t); d.payload != "second" || d.from != allowed.addr {
		t.Fatalf("after the blocked packet: got %q from %v", d.payload, d.from)
	}
	a.silent(t)
	a.Settle()
	if n := blocked.received.Load(); n != 0 {
		t.Fatalf("the blocked peer received %d packets", n)
	}
	links := hole.opened()
	if len(links) != 1 || links[0].sent.Load() != 1 {
		t.Fatal("the blocked packet did not go to the block outbound's sub-link")
	}
	if links[0].opened.Dst != blocked.addr || links[0].opened.Network != netx.UDP || links[0].opened.Inbound != "socks-in" {
		t.Fatalf("the block sub-link was opened with %+v", links[0].opened)
	}
}

func TestRepliesAreAttributedToTheirSources(t *testing.T) {
	peerA, peerB := newEcho(t), newEcho(t)
	a := newAssoc(t, planeOf(t, 1, target("direct", 1, &udpOutbound{})))
	for round := range 3 {
		a.send(t, fmt.Sprint("for A ", round), peerA.addr)
		a.send(t, fmt.Sprint("for B ", round), peerB.addr)
		got := map[netx.Addr]string{}
		for range 2 {
			d := a.reply(t)
			got[d.from] = d.payload
		}
		if got[peerA.addr] != fmt.Sprint("for A ", round) || got[peerB.addr] != fmt.Sprint("for B ", round) {
			t.Fatalf("round %d: replies %v (A is %v, B is %v)", round, got, peerA.addr, peerB.addr)
		}
	}
}

func TestEachOutboundIsOneTrackedFlowWithExactCounts(t *testing.T) {
	peerA, peerB := newEcho(t), newEcho(t)
	outA, outB := &udpOutbound{}, &udpOutbound{}
	p := planeOf(t, 4, target("block", 1, &scriptedOutbound{}),
		byPort{peerA.addr.Port, target("a", 1, outA)},
		byPort{peerB.addr.Port, target("b", 3, outB)})
	a := newAssoc(t, p)

	a.send(t, "12345", peerA.addr)
	a.send(t, "12345678901", peerB.addr)
	a.send(t, "1234567", peerA.addr)
	for range 3 {
		a.reply(t)
	}
	if n := len(a.tracker.Flows()); n != 2 {
		t.Fatalf("%d tracked flows, want 2: %+v", n, a.tracker.Flows())
	}
	if outA.opens.Load() != 1 || outB.opens.Load() != 1 {
		t.Fatalf("opens: a %d, b %d", outA.opens.Load(), outB.opens.Load())
	}
	fa, fb := a.flow(t, "a@v1"), a.flow(t, "b@v3")
	if fa.Up != 12 || fa.Down != 12 {
		t.Fatalf("a@v1: up %d down %d, want 12 and 12", fa.Up, fa.Down)
	}
	if fb.Up != 11 || fb.Down != 11 {
		t.Fatalf("b@v3: up %d down %d, want 11 and 11", fb.Up, fb.Down)
	}
	want := fa.Meta
	want.Network, want.Inbound, want.User, want.Source = netx.UDP, "socks-in", "alice", assocFlow.Src
	want.Destination, want.Rule, want.Outbound, want.Epoch = peerA.addr, "rule 1", "a@v1", 4
	want.Chain = []string{"a"}
	if !reflect.DeepEqual(fa.Meta, want) {
		t.Fatalf("a@v1 meta %+v, want %+v", fa.Meta, want)
	}
	if fb.Rule != "rule 2" || fb.Destination != peerB.addr {
		t.Fatalf("b@v3 meta %+v", fb.Meta)
	}
}

// manyTargets builds n scripted outbounds, each reached by its own port.
func manyTargets(t *testing.T, n int) (*plane.Plane, []*scriptedOutbound) {
	outs := make([]*scriptedOutbound, n)
	var rules []byPort
	for i := range outs {
		outs[i] = &scriptedOutbound{}
		rules = append(rules, byPort{uint16(20000 + i), target(fmt.Sprint("out", i), 1, outs[i])})
	}
	return planeOf(t, 1, target("block", 1, &scriptedOutbound{}), rules...), outs
}

func toPort(i int) netx.Addr { return netx.DomainAddr("peer.example", uint16(20000+i)) }

// open returns how many of the outbounds' links are still open.
func open(outs []*scriptedOutbound) int {
	n := 0
	for _, o := range outs {
		for _, l := range o.opened() {
			if l.closes.Load() == 0 {
				n++
			}
		}
	}
	return n
}

func TestEvictionClosesTheLeastRecentlyUsedSubLink(t *testing.T) {
	t.Run("the first opened", func(t *testing.T) {
		p, outs := manyTargets(t, fanout.MaxSubs+1)
		a := newAssoc(t, p)
		for i := range outs {
			a.send(t, "x", toPort(i))
		}
		a.Settle()
		if n := open(outs); n != fanout.MaxSubs {
			t.Fatalf("%d sub-links open, want %d", n, fanout.MaxSubs)
		}
		if n := len(a.tracker.Flows()); n != fanout.MaxSubs {
			t.Fatalf("%d tracked flows, want %d", n, fanout.MaxSubs)
		}
		first := outs[0].opened()
		if len(first) != 1 || first[0].closes.Load() != 1 {
			t.Fatal("the first sub-link opened was not the one closed")
		}
		for _, s := range a.tracker.Flows() {
			if s.Outbound == "out0@v1" {
				t.Fatal("the evicted sub-link's flow is still tracked")
			}
		}
	})
	t.Run("a recent send protects it", func(t *testing.T) {
		p, outs := manyTargets(t, fanout.MaxSubs+1)
		a := newAssoc(t, p)
		for i := range fanout.MaxSubs {
			a.send(t, "x", toPort(i))
		}
		a.send(t, "again", toPort(0))
		a.send(t, "x", toPort(fanout.MaxSubs))
		a.Settle()
		if n := open(outs); n != fanout.MaxSubs {
			t.Fatalf("%d sub-links open, want %d", n, fanout.MaxSubs)
		}
		if outs[0].opened()[0].closes.Load() != 0 {
			t.Fatal("the sub-link sent to most recently was evicted")
		}
		if outs[1].opened()[0].closes.Load() != 1 {
			t.Fatal("the least recently sent to sub-link was not evicted")
		}
		a.send(t, "back", toPort(1))
		a.Settle()
		if len(outs[1].opened()) != 2 {
			t.Fatal("a packet for an evicted version did not open a new sub-link")
		}
	})
}

func TestAFailedOpenOrSendDropsThePacket(t *testing.T) {
	peer := newEcho(t)
	web := target("web", 1, &scriptedOutbound{openErr: &outbound.NoUDPError{What: "http"}})
	flakyOut := &scriptedOutbound{sendErr: errors.New("frame larger than the client runtime's buffer")}
	flaky := target("flaky", 2, flakyOut)
	a := newAssoc(t, planeOf(t, 1, target("direct", 1, &udpOutbound{}),
		byPort{80, web}, byPort{443, flaky}))

	a.send(t, "dropped", netx.DomainAddr("web.example", 80))
	a.Settle()
	if n := a.logs.count("udp fan-out: opening web@v1 failed: http carries no datagrams"); n != 1 {
		t.Fatalf("the failed open was logged %d times; logged:\n%s", n, a.logs)
	}
	a.send(t, "dropped", netx.DomainAddr("flaky.example", 443))
	a.Settle()
	sendFailed := "udp fan-out: sending on flaky@v2 failed: frame larger than the client runtime's buffer"
	if n := a.logs.count(sendFailed); n != 1 {
		t.Fatalf("the failed send was logged %d times; logged:\n%s", n, a.logs)
	}
	links := flakyOut.opened()
	if len(links) != 1 || links[0].closes.Load() == 0 {
		t.Fatal("the sub-link whose send failed was not closed")
	}
	for _, s := range a.tracker.Flows() {
		if s.Outbound == "flaky@v2" {
			t.Fatal("the sub-link whose send failed is still tracked")
		}
	}
	a.send(t, "dropped again", netx.DomainAddr("flaky.example", 443))
	a.Settle()
	if len(flakyOut.opened()) != 2 || a.logs.count(sendFailed) != 2 {
		t.Fatal("the next packet routed to the failed sub-link's version did not open a fresh one")
	}

	a.send(t, "still here", peer.addr)
	if d := a.reply(t); d.payload != "still here" || d.from != peer.addr {
		t.Fatalf("got %q from %v", d.payload, d.from)
	}
}

func TestARouteChangeReachesTheNextPacket(t *testing.T) {
	peer := newEcho(t)
	first, second, third := &udpOutbound{}, &udpOutbound{}, &udpOutbound{}
	a := newAssoc(t, planeOf(t, 1, target("a", 1, first)))

	a.send(t, "one", peer.addr)
	a.reply(t)
	a.cell.Store(planeOf(t, 2, target("b", 1, second)))
	a.send(t, "two!", peer.addr)
	if d := a.reply(t); d.payload != "two!" {
		t.Fatalf("got %q", d.payload)
	}
	if second.opens.Load() != 1 {
		t.Fatal("the packet after the route change did not take the new route")
	}
	if fa, fb := a.flow(t, "a@v1"), a.flow(t, "b@v1"); fa.Up != 3 || fb.Up != 4 || fb.Epoch != 2 || fb.Rule != "final" {
		t.Fatalf("a@v1 %+v, b@v1 %+v", fa, fb)
	}

	// A new version of a tag is a new key: it opens a sub-link of its own.
	a.cell.Store(planeOf(t, 3, target("a", 2, third)))
	a.send(t, "three", peer.addr)
	a.reply(t)
	if third.opens.Load() != 1 || first.opens.Load() != 1 {
		t.Fatalf("opens: a@v1 %d, a@v2 %d", first.opens.Load(), third.opens.Load())
	}
	if f := a.flow(t, "a@v2"); f.Up != 5 || f.Epoch != 3 {
		t.Fatalf("a@v2 %+v", f)
	}
}

func TestAKilledSubLinkEndsAlone(t *testing.T) {
	peerA, peerB := newEcho(t), newEcho(t)
	outA := &udpOutbound{}
	a := newAssoc(t, planeOf(t, 1, target("block", 1, &scriptedOutbound{}),
		byPort{peerA.addr.Port, target("a", 1, outA)},
		byPort{peerB.addr.Port, target("b", 1, &udpOutbound{})}))
	a.send(t, "to A", peerA.addr)
	a.send(t, "to B", peerB.addr)
	a.reply(t)
	a.reply(t)
	killed := a.flow(t, "a@v1").ID
	if !a.tracker.Kill(killed) {
		t.Fatal("Kill did not find the sub-link")
	}
	a.logs.waitLog(t, "udp fan-out: sub-link a@v1 ended: flow killed")

	a.send(t, "B again", peerB.addr)
	if d := a.reply(t); d.payload != "B again" || d.from != peerB.addr {
		t.Fatalf("got %q from %v", d.payload, d.from)
	}
	a.send(t, "A again", peerA.addr)
	if d := a.reply(t); d.payload != "A again" || d.from != peerA.addr {
		t.Fatalf("got %q from %v", d.payload, d.from)
	}
	if outA.opens.Load() != 2 {
		t.Fatalf("a@v1 opened %d times, want 2", outA.opens.Load())
	}
	if f := a.flow(t, "a@v1"); f.ID == killed || f.Up != 7 {
		t.Fatalf("the reopened sub-link is %+v", f)
	}
}

func TestADrainedSubLinkEndsAlone(t *testing.T) {
	peer, other := newEcho(t), newEcho(t)
	old := target("a", 1, &udpOutbound{})
	b := target("b", 1, &udpOutbound{})
	a := newAssoc(t, planeOf(t, 1, old, byPort{other.addr.Port, b}))
	a.send(t, "x", peer.addr)
	a.send(t, "y", other.addr)
	a.reply(t)
	a.reply(t)

	old.CloseFlows()
	a.logs.waitLog(t, "udp fan-out: sub-link a@v1 ended: "+plane.ErrDrained.Error())
	a.send(t, "dropped", peer.addr)
	a.Settle()
	if a.logs.count("udp fan-out: opening a@v1 failed: "+plane.ErrDrained.Error()) != 1 {
		t.Fatalf("a drained version was opened; logged:\n%s", a.logs)
	}
	a.send(t, "z", other.addr)
	if d := a.reply(t); d.payload != "z" {
		t.Fatalf("got %q", d.payload)
	}
	a.cell.Store(planeOf(t, 2, target("a", 2, &udpOutbound{}), byPort{other.addr.Port, b}))
	a.send(t, "w", peer.addr)
	if d := a.reply(t); d.payload != "w" || d.from != peer.addr {
		t.Fatalf("got %q from %v", d.payload, d.from)
	}
}

// Every sub-link with a datagram waiting gets its turn: with one sub-link
// flooding, another's datagram is handed over within the next two reads.
func TestABusySubLinkDoesNotStarveTheOthers(t *testing.T) {
	busy := &scriptedOutbound{flood: &datagram{payload: "flood", from: netx.DomainAddr("busy.example", 1)}}
	quietFrom := netx.DomainAddr("quiet.example", 2)
	quiet := &scriptedOutbound{replies: func(p []byte, to netx.Addr) []datagram {
		return []datagram{{payload: "hello", from: quietFrom}}
	}}
	cell := new(plane.Cell)
	cell.Store(planeOf(t, 1, target("block", 1, &scriptedOutbound{}),
		byPort{1, target("busy", 1, busy)}, byPort{2, target("quiet", 1, quiet)}))
	l := fanout.New(cell, assocFlow, track.New(), nil)
	defer l.Close()
	buf := make([]byte, 64)

	if err := l.WritePacket([]byte("go"), netx.DomainAddr("busy.example", 1)); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		if _, _, err := l.ReadPacket(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.WritePacket([]byte("hi"), quietFrom); err != nil {
		t.Fatal(err)
	}
	l.Settle()
	// Let the quiet sub-link's reader take its datagram and queue up behind
	// (or before) the flood.
	for quiet.opened()[0].reads.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	for i := range 2 {
		n, from, err := l.ReadPacket(buf)
		if err != nil {
			t.Fatal(err)
		}
		if from == quietFrom {
			if string(buf[:n]) != "hello" {
				t.Fatalf("got %q", buf[:n])
			}
			return
		}
		if i == 1 {
			t.Fatal("the busy sub-link was served twice while the quiet one waited")
		}
	}
}

func TestCloseEndsTheAssociation(t *testing.T) {
	peer := newEcho(t)
	hole := &scriptedOutbound{linger: 100 * time.Millisecond}
	stuck := &blockingOutbound{entered: make(chan struct{}), ctxErr: make(chan error, 1)}
	a := newAssoc(t, planeOf(t, 1, target("direct", 1, &udpOutbound{}),
		byPort{9, target("block", 1, hole)}, byPort{10, target("stuck", 1, stuck)}))
	a.send(t, "x", peer.addr)
	a.reply(t)
	a.send(t, "y", netx.DomainAddr("hole.example", 9))
	a.Settle()
	if n := len(a.tracker.Flows()); n != 2 {
		t.Fatalf("%d flows before Close", n)
	}
	// The open of the silent outbound runs on its own: the packet that
	// started it is queued, and WritePacket returns at once.
	if err := a.WritePacket([]byte("z"), netx.DomainAddr("stuck.example", 10)); err != nil {
		t.Fatal(err)
	}
	<-stuck.entered

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !hole.opened()[0].ended.Load() {
		t.Fatal("Close returned before the sub-link's reader did")
	}
	<-a.drained // the blocked ReadPacket returned net.ErrClosed
	select {
	case err := <-stuck.ctxErr:
		if err == nil {
			t.Fatal("the open's context was not cancelled")
		}
	default:
		t.Fatal("Close returned before the open it cancelled ended")
	}
	if n := len(a.tracker.Flows()); n != 0 {
		t.Fatalf("%d tracked flows after Close", n)
	}
	if hole.opened()[0].closes.Load() != 1 {
		t.Fatal("Close did not close the sub-link")
	}
	if err := a.WritePacket([]byte("late"), peer.addr); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WritePacket after Close: %v", err)
	}
	if _, _, err := a.ReadPacket(make([]byte, 8)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadPacket after Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if peer.received.Load() != 1 {
		t.Fatal("a packet was sent after Close")
	}
}
