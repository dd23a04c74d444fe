package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

func TestNodeFailureFencesTargetsAndProbes(t *testing.T) {
	h := newHarness(t, 2)
	a, b, other := scope(target(1), 1), scope(target(2), 1), scope(target(2), 2)
	for range 4 {
		h.useful(a)
		h.useful(b)
		h.useful(other)
	}
	h.s.RecordProbe(grp, a.Network, a.Node, h.now(), 30*time.Millisecond, true)
	h.s.RecordProbe(grp, a.Network, other.Node, h.now(), 30*time.Millisecond, true)
	probeStart := h.now()
	h.clk.Advance(time.Second)

	// An unrelated target failure invalidates neither probes nor b.
	h.fail(a, score.TargetPath)
	if v := h.view(b); !v.Probe.Valid || v.Probe.RTT != 30*time.Millisecond || !v.Exact.Qualified || v.Exact.Hard {
		t.Fatalf("a target failure fenced other evidence: %+v", v)
	}

	// A node failure fences every target of the node and its probe.
	h.clk.Advance(time.Second)
	h.fail(a, score.SharedCarrier)
	v := h.view(b)
	if !v.Exact.Hard || v.Exact.Qualified || v.Probe.Valid || !v.Global.Hard {
		t.Fatalf("a node failure did not fence b: %+v", v)
	}
	// A probe that started before the failure and lands after it is of
	// the fenced generation.
	h.s.RecordProbe(grp, a.Network, a.Node, probeStart, 10*time.Millisecond, true)
	if h.view(b).Probe.Valid {
		t.Fatal("a probe started before the failure was accepted")
	}
	h.s.RecordProbe(grp, a.Network, a.Node, h.now().Add(time.Millisecond), 10*time.Millisecond, true)
	if p := h.view(b).Probe; !p.Valid || p.RTT != 10*time.Millisecond {
		t.Fatalf("a fresh probe was not accepted: %+v", p)
	}
	// Another node is untouched.
	if v := h.view(other); v.Exact.Hard || !v.Exact.Qualified || !v.Probe.Valid {
		t.Fatalf("another node was fenced: %+v", v)
	}
	// A probe failure invalidates its own slot only.
	h.s.RecordProbe(grp, a.Network, other.Node, h.now(), 0, false)
	if v := h.view(other); v.Probe.Valid || v.Exact.Hard || !v.Exact.Qualified {
		t.Fatalf("a probe failure: %+v", v)
	}
}

// Each targeted cell needs its own four reporters, even after the node
// aggregate recovered through other targets.
func TestEachTargetRecoversOnItsOwn(t *testing.T) {
	h := newHarness(t, 1)
	a, b := scope(target(1), 1), scope(target(2), 1)
	h.useful(a)
	h.useful(b)
	h.clk.Advance(time.Second)
	h.fail(a, score.ProxyProtocol)
	h.clk.Advance(time.Second)
	for range 4 {
		h.live(a)
	}
	v := h.view(b)
	if v.Global.Hard || v.Family.Hard || !v.Exact.Hard {
		t.Fatalf("after a's recovery: global %v family %v b %v", v.Global.Hard, v.Family.Hard, v.Exact.Hard)
	}
	for range 4 {
		h.live(b)
	}
	if h.view(b).Exact.Hard {
		t.Fatal("b's own four reporters did not recover it")
	}
}

// A cell created during an open node episode inherits it; one created after
// the node recovered inherits the failure time and episode, so a delayed
// report of that episode does not restart it, while it still counts.
func TestChildInheritsNodeEpisode(t *testing.T) {
	h := newHarness(t, 1)
	a := scope(target(1), 1)
	ep := h.s.NewEpisode()
	late := h.open(scope(target(7), 1)) // another flow on the same carrier
	h.open(a).Fail(h.now(), score.Failure{Kind: score.SharedCarrier, Episode: ep})
	h.clk.Advance(time.Second)
	during := scope(target(2), 1)
	h.begin(during).Cancel(h.now())
	if !h.view(during).Exact.Hard {
		t.Fatal("a cell born during the node episode is not hard")
	}
	for range 4 {
		h.live(a)
	}
	if h.view(a).Global.Hard {
		t.Fatal("the node did not recover")
	}
	after := scope(target(3), 1)
	h.begin(after).Cancel(h.now())
	if h.view(after).Exact.Hard {
		t.Fatal("a cell born after recovery is hard")
	}
	// Delayed fanout of the same episode: counted, no restart.
	h.clk.Advance(time.Second)
	h.open(after).Fail(h.now(), score.Failure{Kind: score.SharedCarrier, Episode: ep})
	late.Fail(h.now(), score.Failure{Kind: score.SharedCarrier, Episode: ep})
	v := h.view(after)
	if v.Global.Hard || v.Exact.Hard || v.Exact.Failures < 0.99 || v.Global.Failures < 2.99 {
		t.Fatalf("delayed fanout restarted the episode or was not counted: %+v", v)
	}
	// An independently constructed failure is a new episode.
	h.fail(after, score.SharedCarrier)
	if v := h.view(after); !v.Global.Hard || !v.Exact.Hard {
		t.Fatalf("an independent failure did not open an episode: %+v", v)
	}
}

// Flows failed by one fanned-out failure report one episode: the first
// opens it, the rest count without resetting a recovery under way.
func TestSharedEpisodeCountsEachFlowOnce(t *testing.T) {
	h := newHarness(t, 1)
	a := scope(target(1), 1)
	var flows []*score.Reporter
	for range 3 {
		flows = append(flows, h.open(a))
	}
	ep := h.s.NewEpisode()
	flows[0].Fail(h.now(), score.Failure{Kind: score.StreamReset, Episode: ep}) // target-scoped
	h.clk.Advance(time.Second)
	h.live(a)
	h.live(a)
	flows[1].Fail(h.now(), score.Failure{Kind: score.StreamReset, Episode: ep})
	h.live(a)
	h.live(a)
	v := h.view(a)
	if v.Exact.Hard || v.Exact.Failures < 1.99 {
		t.Fatalf("a second flow of one episode reset the cohort or was not counted: %+v", v.Exact)
	}
	flows[2].Fail(h.now(), score.Failure{Kind: score.StreamReset})
	if !h.view(a).Exact.Hard {
		t.Fatal("an independent failure did not reopen the cell")
	}
}

// evictAggregates pushes every aggregate cell of grp out of its table,
// leaving the exact cells in theirs.
func evictAggregates(h *harness, nodes int) {
	ms := members(nodes)
	for i := range score.AggregateCells {
		ms = append(ms, score.Member{Group: score.GroupID{0xee, byte(i >> 8), byte(i)}, Node: node(1), Incarnation: 1})
	}
	h.s.Reload(h.now(), ms)
	for _, m := range ms[nodes:] {
		sc := scope(netx.Addr{}, 1)
		sc.Group = m.Group
		h.begin(sc).Cancel(h.now()) // a global and a family cell each
	}
}

// A flow whose global aggregate was evicted still reports under the node's
// current record: its exact cell applies a node failure recorded since on
// the recreated aggregate before its RX, so the RX joins the post-failure
// cohort; and its own node failure still fences its cells.
func TestReporterOutlivesItsAggregate(t *testing.T) {
	h := newHarness(t, 1)
	a, b := scope(target(1), 1), scope(target(2), 1)
	r := h.open(a)
	evictAggregates(h, 1)
	h.clk.Advance(time.Second)
	h.fail(b, score.SharedCarrier) // recreates the node's aggregates
	h.clk.Advance(time.Second)
	r.Progress(h.now(), 0, 1)
	for range 3 {
		h.live(a)
	}
	if v := h.view(a); v.Exact.Hard {
		t.Fatalf("the old reporter's RX after the failure did not count: %+v", v.Exact)
	}

	h2 := newHarness(t, 1)
	r, r2 := h2.open(a), h2.open(a)
	evictAggregates(h2, 1)
	ep := h2.s.NewEpisode()
	r.Fail(h2.now(), score.Failure{Kind: score.SharedCarrier, Episode: ep})
	if v := h2.view(a); !v.Exact.Hard || v.Global.Present {
		t.Fatalf("a node failure of a reporter without its aggregate: %+v", v)
	}
	h2.clk.Advance(time.Second)
	for range 4 {
		h2.live(a)
	}
	r2.Fail(h2.now(), score.Failure{Kind: score.SharedCarrier, Episode: ep})
	if v := h2.view(a); v.Exact.Hard {
		t.Fatalf("a delayed report of the episode restarted it: %+v", v.Exact)
	}
}

// A delayed report of a target episode still does not restart it after a
// node episode came in between.
func TestDelayedTargetEpisodeAfterNodeEpisode(t *testing.T) {
	h := newHarness(t, 1)
	a := scope(target(1), 1)
	late := h.open(a)
	ep := h.s.NewEpisode()
	h.open(a).Fail(h.now(), score.Failure{Kind: score.StreamReset, Episode: ep})
	h.clk.Advance(time.Second)
	h.fail(a, score.SharedCarrier)
	h.clk.Advance(time.Second)
	for range 4 {
		h.live(a)
	}
	if v := h.view(a); v.Exact.Hard || v.Global.Hard {
		t.Fatalf("not recovered: %+v", v)
	}
	late.Fail(h.now(), score.Failure{Kind: score.StreamReset, Episode: ep})
	if v := h.view(a); v.Exact.Hard || v.Exact.Failures < 2.99 {
		t.Fatalf("the delayed report restarted the episode or was not counted: %+v", v.Exact)
	}
}
