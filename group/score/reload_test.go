package score_test

import (
	"errors"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

func TestReloadPrunesRemovedCells(t *testing.T) {
	h := newHarness(t, 3)
	other := score.GroupID{0xcc}
	ms := append(members(3), score.Member{Group: other, Node: node(1), Incarnation: 1})
	h.s.Reload(h.now(), ms)
	og := scope(target(1), 1)
	og.Group = other
	for _, sc := range []score.Scope{scope(target(1), 1), scope(target(1), 2), scope(target(1), 3), og} {
		h.useful(sc)
	}
	if e, a := h.s.Cells(); e != 4 || a != 8 {
		t.Fatalf("cells %d exact, %d aggregate; want 4, 8", e, a)
	}
	gone := h.live(scope(target(1), 2))
	changed := h.live(scope(target(1), 3))
	h.clk.Advance(time.Second)
	// Node 2 leaves, node 3 changes incarnation, the other group goes.
	h.s.Reload(h.now(), []score.Member{
		{Group: grp, Node: node(1), Incarnation: 1},
		{Group: grp, Node: node(3), Incarnation: 2},
	})
	if e, a := h.s.Cells(); e != 1 || a != 2 {
		t.Fatalf("after reload: %d exact, %d aggregate; want 1, 2", e, a)
	}
	if v := h.view(scope(target(1), 2)); v.Exact.Present || v.Global.Present {
		t.Fatalf("a removed node's evidence survived: %+v", v)
	}
	if v := h.view(scope(target(1), 3)); v.Exact.Present {
		t.Fatalf("a changed incarnation's evidence survived: %+v", v)
	}
	if v := h.view(scope(target(1), 1)); v.Exact.Successes < 0.99 {
		t.Fatalf("a surviving cell lost its evidence: %+v", v)
	}
	// Late feedback for removed cells is ignored and recreates nothing.
	gone.Fail(h.now(), score.Failure{Kind: score.ProxyAuth})
	changed.Settle(h.now())
	if e, a := h.s.Cells(); e != 1 || a != 2 {
		t.Fatalf("late feedback recreated cells: %d exact, %d aggregate", e, a)
	}
	if _, err := h.s.Begin(scope(target(1), 2), h.now()); !errors.Is(err, score.ErrNotMember) {
		t.Fatalf("Begin for a removed member: %v", err)
	}
	if _, err := h.s.Begin(og, h.now()); !errors.Is(err, score.ErrNotMember) {
		t.Fatalf("Begin for a removed group: %v", err)
	}
	// The changed node starts fresh.
	h.useful(scope(target(1), 3))
	if v := h.view(scope(target(1), 3)); !near(v.Exact.Attempts, 1) {
		t.Fatalf("the new incarnation: %+v", v.Exact)
	}
}

// Admitted flows of surviving cells keep reporting across a reload, under
// its fence.
func TestReloadKeepsSurvivingReporters(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	h.fail(sc, score.TargetPath)
	h.clk.Advance(time.Second)
	var rs []*score.Reporter
	for range 4 {
		rs = append(rs, h.open(sc))
	}
	h.s.Reload(h.now(), members(1))
	h.clk.Advance(time.Second)
	for _, r := range rs {
		r.Progress(h.now(), 0, 1)
	}
	if v := h.view(sc); v.Exact.Hard {
		t.Fatalf("surviving reporters could not recover after the reload: %+v", v.Exact)
	}
}

func TestLRUBounds(t *testing.T) {
	h := newHarness(t, 1)
	first := h.live(scope(target(0), 1))
	for i := range score.ExactCells + 100 {
		h.begin(scope(target(i+1), 1)).Cancel(h.now())
	}
	if e, _ := h.s.Cells(); e != score.ExactCells {
		t.Fatalf("%d exact cells, want %d", e, score.ExactCells)
	}
	// The evicted cell's reporter cannot recreate it.
	first.Settle(h.now())
	if v := h.view(scope(target(0), 1)); v.Exact.Present {
		t.Fatal("an evicted reporter recreated its cell")
	}
	// Aggregates: one family and one global cell per (group, network,
	// node); fill them over many groups.
	ms := make([]score.Member, 0, score.AggregateCells)
	for i := range score.AggregateCells {
		ms = append(ms, score.Member{Group: score.GroupID{byte(i >> 8), byte(i)}, Node: node(1), Incarnation: 1})
	}
	h.s.Reload(h.now(), ms)
	for _, m := range ms {
		for _, n := range []netx.Network{netx.TCP, netx.UDP} {
			sc := scope(netx.Addr{}, 1)
			sc.Group, sc.Network = m.Group, n
			h.begin(sc).Cancel(h.now())
		}
	}
	if _, a := h.s.Cells(); a != score.AggregateCells {
		t.Fatalf("%d aggregate cells, want %d", a, score.AggregateCells)
	}
}

func TestBeginRefusesBadTargets(t *testing.T) {
	h := newHarness(t, 1)
	for _, a := range []netx.Addr{netx.DomainAddr(".", 1), netx.DomainAddr("a b", 1), netx.DomainAddr(string(make([]byte, 300)), 1)} {
		if _, err := h.s.Begin(scope(a, 1), h.now()); !errors.Is(err, score.ErrBadTarget) {
			t.Errorf("%q: %v", a.Name, err)
		}
	}
}

func TestReloadClearsProbeBaseline(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	started := h.now()
	h.s.RecordProbe(grp, sc.Network, sc.Node, started, 25*time.Millisecond, true)
	if !h.view(sc).Probe.Valid {
		t.Fatal("probe not recorded")
	}
	h.clk.Advance(time.Second)
	h.s.Reload(h.now(), members(1))
	if p := h.view(sc).Probe; p.Valid || p.RTT != 0 {
		t.Fatalf("the baseline survived the reload: %+v", p)
	}
	// An observation of the old generation (started before the reload)
	// is rejected; a new one is taken.
	h.s.RecordProbe(grp, sc.Network, sc.Node, started, 25*time.Millisecond, true)
	if h.view(sc).Probe.Valid {
		t.Fatal("an old-generation probe was accepted")
	}
	h.s.RecordProbe(grp, sc.Network, sc.Node, h.now().Add(time.Millisecond), 25*time.Millisecond, true)
	if !h.view(sc).Probe.Valid {
		t.Fatal("a new probe was rejected")
	}
	// A late old-generation failure does not overwrite it.
	h.s.RecordProbe(grp, sc.Network, sc.Node, started, 0, false)
	if !h.view(sc).Probe.Valid {
		t.Fatal("an old-generation probe failure invalidated the new slot")
	}
}
