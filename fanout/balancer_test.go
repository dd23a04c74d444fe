package fanout_test

import (
	"slices"
	"sync"
	"testing"

	"switchyard/netx"
	"switchyard/plane"
)

// pickFirstUp is a balancer that keeps a preferred member while it is up and
// otherwise takes the first member that is up. It records every preference.
type pickFirstUp struct {
	members []*plane.Target

	mu      sync.Mutex
	down    map[plane.OutboundID]bool
	prefers []string // "" for none
}

func (s *pickFirstUp) Choose(q *plane.Query) *plane.Target {
	prefer := q.Prefer
	s.mu.Lock()
	defer s.mu.Unlock()
	if prefer == nil {
		s.prefers = append(s.prefers, "")
	} else {
		s.prefers = append(s.prefers, prefer.String())
		for _, m := range s.members {
			if m.ID() == *prefer && !s.down[m.ID()] {
				return m
			}
		}
	}
	for _, m := range s.members {
		if !s.down[m.ID()] {
			return m
		}
	}
	return s.members[0]
}

func (s *pickFirstUp) setDown(id plane.OutboundID) {
	s.mu.Lock()
	s.down[id] = true
	s.mu.Unlock()
}

func (s *pickFirstUp) setUp(id plane.OutboundID) {
	s.mu.Lock()
	delete(s.down, id)
	s.mu.Unlock()
}

func (s *pickFirstUp) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.prefers...)
}

// A balancer is resolved per packet, preferring the member whose sub-link the
// balancer led to most recently, and a member reached by its own tag shares
// the balanced sub-link.
func TestABalancerPrefersTheMemberInUse(t *testing.T) {
	out1, out2 := &scriptedOutbound{}, &scriptedOutbound{}
	m1, m2 := target("m1", 1, out1), target("m2", 4, out2)
	sel := &pickFirstUp{members: []*plane.Target{m2, m1}, down: map[plane.OutboundID]bool{}}
	lb := plane.NewChooserTarget(plane.OutboundID{Tag: "lb", Version: 1}, sel)
	a := newAssoc(t, planeOf(t, 1, lb, byPort{7, m1}))
	peer := func(port uint16) netx.Addr { return netx.DomainAddr("peer.example", port) }

	a.send(t, "p1", peer(1)) // no preference: the first member up, m2
	a.send(t, "p2", peer(2)) // prefers m2, kept
	sel.setDown(m2.ID())
	a.send(t, "p3", peer(3)) // prefers m2, which is down: m1
	a.send(t, "p4", peer(4)) // prefers m1
	a.send(t, "p5", peer(7)) // m1 by its own tag: the same sub-link, via m1 now
	sel.setUp(m2.ID())
	a.send(t, "p6", peer(5)) // the balancer led to m2's sub-link most recently
	a.Settle()

	want := []string{"", "m2@v4", "m2@v4", "m1@v1", "m2@v4"}
	got := sel.seen()
	if len(got) != len(want) {
		t.Fatalf("preferences %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("preferences %q, want %q", got, want)
		}
	}
	if len(out1.opened()) != 1 || len(out2.opened()) != 1 {
		t.Fatalf("m1 opened %d sub-links, m2 %d; want one each", len(out1.opened()), len(out2.opened()))
	}
	if n1, n2 := out1.opened()[0].sent.Load(), out2.opened()[0].sent.Load(); n1 != 3 || n2 != 3 {
		t.Fatalf("m1 carried %d packets, m2 %d; want 3 each", n1, n2)
	}
	if f := a.flow(t, "m2@v4"); f.Rule != "final" || f.Destination != peer(1) || !slices.Equal(f.Chain, []string{"lb", "m2"}) {
		t.Fatalf("the balanced sub-link is tracked as %+v", f.Meta)
	}
	// A sub-link files the chain of the packet that opened it.
	if f := a.flow(t, "m1@v1"); !slices.Equal(f.Chain, []string{"lb", "m1"}) {
		t.Fatalf("m1's sub-link is tracked with the chain %q", f.Chain)
	}
}

// via is a group that always selects one sub-group, named sub, whose pick
// is leaf.
type via struct {
	sub  string
	leaf *plane.Target
}

func (v via) Choose(q *plane.Query) *plane.Target {
	if !q.Push(v.sub) {
		return nil
	}
	return v.leaf
}

// A sub-link of a nested selection is tracked with the whole chain: the
// route target, the selected sub-group, the leaf. Taking it costs the
// packets nothing.
func TestASubLinkIsTrackedWithItsSelectionChain(t *testing.T) {
	leaf := target("hk", 2, &scriptedOutbound{})
	outer := plane.NewChooserTarget(plane.OutboundID{Tag: "proxy", Version: 1}, via{sub: "auto", leaf: leaf})
	a := newAssoc(t, planeOf(t, 1, outer))
	a.send(t, "p1", netx.DomainAddr("peer.example", 1))
	a.Settle()
	if f := a.flow(t, "hk@v2"); !slices.Equal(f.Chain, []string{"proxy", "auto", "hk"}) {
		t.Fatalf("the sub-link is tracked with the chain %q", f.Chain)
	}
}
