package plane_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/netx"
	"switchyard/plane"
)

// packetOut is a scripted UDP outbound: refuse fails at once, hang waits
// for the dial's end (and takes a moment to wind down), otherwise a link
// is opened.
type packetOut struct {
	refuse, hang bool
	ended        atomic.Bool
	link         *fakeLink
}

var errRefused = errors.New("connection refused")

func (o *packetOut) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("no streams")
}

func (o *packetOut) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	defer o.ended.Store(true)
	switch {
	case o.refuse:
		return nil, errRefused
	case o.hang:
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond)
		return nil, ctx.Err()
	}
	o.link = &fakeLink{}
	return o.link, nil
}

type fakeLink struct{ closed atomic.Bool }

func (l *fakeLink) WritePacket([]byte, netx.Addr) error { return nil }
func (l *fakeLink) ReadPacket([]byte) (int, netx.Addr, error) {
	return 0, netx.Addr{}, net.ErrClosed
}
func (l *fakeLink) Close() error { l.closed.Store(true); return nil }

// coldGroup is a ColdPreparer over fixed leaves, every one eligible unless
// listed in ineligible.
type coldGroup struct {
	leaves     []*plane.Target
	mu         sync.Mutex
	ineligible map[*plane.Target]bool
}

func (g *coldGroup) Choose(*plane.Query) *plane.Target { return g.leaves[0] }
func (g *coldGroup) ColdCandidates(*plane.Query) []plane.Candidate {
	var out []plane.Candidate
	for _, l := range g.leaves {
		out = append(out, plane.Candidate{Leaf: l, Chain: []string{"auto", l.ID().Tag}})
	}
	return out
}
func (g *coldGroup) ColdEligible(_ *plane.Query, l *plane.Target) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return !g.ineligible[l]
}

func coldRig(outs ...*packetOut) (*plane.Target, *coldGroup) {
	g := &coldGroup{ineligible: map[*plane.Target]bool{}}
	for i, o := range outs {
		g.leaves = append(g.leaves, plane.NewTarget(plane.OutboundID{Tag: string(rune('a' + i)), Version: 1}, o))
	}
	return plane.NewChooserTarget(plane.OutboundID{Tag: "auto", Version: 1}, g), g
}

// The refused candidate is reported, the hanging one is aborted, drained
// and neutral, and the first to open wins, its link guarded by its leaf.
func TestPreparePacketTakesTheFirstEligibleSuccess(t *testing.T) {
	defer goleak.VerifyNone(t)
	dead, slow, good := &packetOut{refuse: true}, &packetOut{hang: true}, &packetOut{}
	via, g := coldRig(dead, slow, good)
	p := &plane.Plane{Admission: netx.NewAdmission(netx.NewGate(8), 8)}
	q := plane.Query{Network: netx.UDP}
	var failed []string
	c, link, err := p.PreparePacket(context.Background(), via, &q, via.ColdCandidates(&q), netx.Flow{Network: netx.UDP}, func(l *plane.Target, _ netx.Phase, err error) {
		if !errors.Is(err, errRefused) {
			t.Errorf("reported %v", err)
		}
		failed = append(failed, l.ID().Tag)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	if c.Leaf != g.leaves[2] || c.Chain[1] != "c" {
		t.Fatalf("winner %s", c.Leaf.ID())
	}
	if !slow.ended.Load() {
		t.Fatal("the loser still ran when PreparePacket returned")
	}
	if len(failed) != 1 || failed[0] != "a" {
		t.Fatalf("failed %v, want [a]", failed)
	}
	if g.leaves[2].Flows() != 1 {
		t.Fatal("the winner's link is not guarded by its leaf")
	}
	if s := p.Admission.Stats(); s.InUse != 0 {
		t.Fatalf("%d admission permits still held", s.InUse)
	}
}

// A success that is not eligible any more is closed and neutral; the next
// candidate wins.
func TestPreparePacketSkipsAnIneligibleSuccess(t *testing.T) {
	defer goleak.VerifyNone(t)
	first, second := &packetOut{}, &packetOut{}
	via, g := coldRig(first, second)
	g.ineligible[g.leaves[0]] = true
	p := &plane.Plane{}
	q := plane.Query{Network: netx.UDP}
	c, link, err := p.PreparePacket(context.Background(), via, &q, via.ColdCandidates(&q), netx.Flow{Network: netx.UDP}, func(l *plane.Target, _ netx.Phase, err error) {
		t.Errorf("%s reported: %v", l.ID(), err)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer link.Close()
	if c.Leaf != g.leaves[1] {
		t.Fatalf("winner %s", c.Leaf.ID())
	}
	if !first.link.closed.Load() || g.leaves[0].Flows() != 0 {
		t.Fatal("the ineligible success's link was not closed")
	}
}

// The plane's establishment deadline bounds the whole preparation; the
// attempts it aborts are neutral.
func TestPreparePacketEndsAtTheEstablishmentDeadline(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b := &packetOut{hang: true}, &packetOut{hang: true}
	via, _ := coldRig(a, b)
	p := &plane.Plane{Establish: 60 * time.Millisecond}
	q := plane.Query{Network: netx.UDP}
	_, _, err := p.PreparePacket(context.Background(), via, &q, via.ColdCandidates(&q), netx.Flow{Network: netx.UDP}, func(l *plane.Target, _ netx.Phase, err error) {
		t.Errorf("%s reported: %v", l.ID(), err)
	})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline's", err)
	}
	if !a.ended.Load() || !b.ended.Load() {
		t.Fatal("an attempt still ran after the deadline's error")
	}
}
