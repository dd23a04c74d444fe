package score_test

import (
	"encoding/json"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// fresh is a two-leaf group whose exact pair on tgt is fresh: leaf 1 the
// trained incumbent, leaf 2 qualified, usable and paired in one block.
func fresh(t *testing.T, tgt netx.Addr) *eng {
	t.Helper()
	h := incumbentAt(t, 2, tgt, 100*time.Millisecond)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(2, tgt, 6, 100*time.Millisecond)
	if m, _ := memberOf(h.explain(tgt), 1); m.Question != "none" {
		t.Fatalf("setup: member question %q, want none", m.Question)
	}
	return h
}

func (h *eng) question(tgt netx.Addr, member int) string {
	h.t.Helper()
	m, ok := memberOf(h.explain(tgt), member)
	if !ok {
		h.t.Fatalf("member %d not evaluated", member)
	}
	return m.Question
}

// A fresh hint reopens the node's pairs — the selection's or the
// challenger's — within the walk's cadence: the next authorized rank
// funds a pair trial it would otherwise consider fresh. Without the hint,
// or with a hint on another network, nothing reopens.
func TestPressureReopensPairQuestion(t *testing.T) {
	tgt := target(1)
	for _, hinted := range []int{1, 2} {
		h := fresh(t, tgt)
		h.e.Pressure(node(hinted), netx.UDP, h.now())
		if q := h.question(tgt, 1); q != "none" {
			t.Fatalf("a UDP hint reopened the TCP pair: %q", q)
		}
		if d := h.rankReq(h.req(tgt)); d.Index != 0 || d.Reason != score.IncumbentHeld {
			t.Fatalf("without a TCP hint: %d %v", d.Index, d.Reason)
		}
		h.e.Pressure(node(hinted), netx.TCP, h.now())
		ex := h.explain(tgt)
		if m, _ := memberOf(ex, 1); m.Question != "pair" || ex.Question != "pair" || ex.NextBusinessFlow == nil || ex.NextBusinessFlow.Member != 1 {
			t.Fatalf("hint on leaf %d: %+v", hinted, ex)
		}
		d := h.e.Rank(h.now(), h.req(tgt))
		if !d.Attempt.Trial() || d.Index != 1 || d.Reason != score.PeriodicExplore {
			t.Fatalf("hint on leaf %d: rank %d %v trial %v, want a pair trial of leaf 2", hinted, d.Index, d.Reason, d.Attempt.Trial())
		}
		d.Attempt.Release(h.now())
	}
}

// Business newer than the hint answers the reopened question.
func TestPressureAnsweredByNewerBlocks(t *testing.T) {
	tgt := target(1)
	h := fresh(t, tgt)
	h.e.Pressure(node(1), netx.TCP, h.now())
	if q := h.question(tgt, 1); q != "pair" {
		t.Fatalf("question %q after the hint", q)
	}
	h.clk.Advance(score.BlockWidth)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(2, tgt, 4, 100*time.Millisecond)
	if q := h.question(tgt, 1); q != "none" {
		t.Fatalf("question %q after a block newer than the hint", q)
	}
}

// A hint changes no utility, qualification, availability, failure count,
// counter, ledger, pool, history or evidence.
func TestPressureMovesNothingElse(t *testing.T) {
	tgt := target(1)
	h := fresh(t, tgt)
	h.e.FlowOn(scope(target(2), 2), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
	_, u0 := h.peek(tgt)
	ex0 := h.explain(tgt)
	before := h.e.State()
	h.e.Pressure(node(1), netx.TCP, h.now())
	h.e.Pressure(node(2), netx.TCP, h.now())
	if after := h.e.State(); after != before {
		t.Fatalf("a hint moved state:\n%s\n---\n%s", before, after)
	}
	_, u1 := h.peek(tgt)
	for i := range u0 {
		if u0[i] != u1[i] {
			t.Fatalf("utility of %d moved: %v → %v", i, u0[i], u1[i])
		}
	}
	ex1 := h.explain(tgt)
	if ex0.Selected != ex1.Selected || ex0.Provisional != ex1.Provisional || ex0.ObservedUsable != ex1.ObservedUsable {
		t.Fatalf("selection evidence moved: %+v → %+v", ex0, ex1)
	}
	r0, _ := json.Marshal(ex0.Relations)
	r1, _ := json.Marshal(ex1.Relations)
	if string(r0) != string(r1) {
		t.Fatalf("relations moved: %s → %s", r0, r1)
	}
	// Promotion reads every live block: the hinted pair still holds the
	// incumbent by the same reason.
	if d := h.rank(tgt); d.Index != 0 || d.Reason != score.IncumbentHeld {
		t.Fatalf("ordinary decision %d %v after the hint", d.Index, d.Reason)
	}
}

// Hints expire after 60 s, a later one replaces an earlier one, and a
// reload fences them (one from before the reload is dropped).
func TestPressureExpiryAndReloadFence(t *testing.T) {
	h := newEng(t, 2)
	at := h.now()
	h.e.Pressure(node(1), netx.TCP, at)
	if c, ok := h.e.HintCut(grp, node(1), netx.TCP, at.Add(60*time.Second-time.Nanosecond)); !ok || !c.Equal(at) {
		t.Fatalf("hint not active just before 60 s: %v %v", c, ok)
	}
	if _, ok := h.e.HintCut(grp, node(1), netx.TCP, at.Add(60*time.Second)); ok {
		t.Fatal("hint active at 60 s")
	}
	if _, ok := h.e.HintCut(grp, node(2), netx.TCP, at); ok {
		t.Fatal("another node's runtime hinted")
	}
	h.e.Pressure(node(1), netx.TCP, at.Add(-time.Second)) // older: ignored
	h.e.Pressure(node(1), netx.TCP, at.Add(10*time.Second))
	if c, _ := h.e.HintCut(grp, node(1), netx.TCP, at.Add(65*time.Second)); !c.Equal(at.Add(10 * time.Second)) {
		t.Fatalf("latest hint %v", c)
	}
	h.clk.Advance(20 * time.Second)
	h.e.Configure(h.now(), []score.GroupSpec{spec(grp, 2)})
	if _, ok := h.e.HintCut(grp, node(1), netx.TCP, h.now()); ok {
		t.Fatal("a hint survived the reload")
	}
	h.e.Pressure(node(1), netx.TCP, at.Add(15*time.Second)) // published before the reload
	if _, ok := h.e.HintCut(grp, node(1), netx.TCP, h.now()); ok {
		t.Fatal("a pre-reload hint was admitted")
	}
	h.e.Pressure(node(1), netx.TCP, h.now().Add(time.Millisecond))
	if _, ok := h.e.HintCut(grp, node(1), netx.TCP, h.now().Add(time.Second)); !ok {
		t.Fatal("a post-reload hint was dropped")
	}
}

// Response degradation reopens freshness only for the exact target whose
// own history the sample degrades: not the aggregate read, and not for a
// sample judged against another target's latency.
func TestDegradationReopensExactTargetOnly(t *testing.T) {
	tgt, other := target(1), target(2)
	h := fresh(t, tgt)
	agg := func() {
		t.Helper()
		for _, m := range h.explain(netx.Addr{}).Members {
			if m.Question == "pair" {
				t.Fatalf("aggregate read reopened: %+v", m)
			}
		}
	}
	agg()
	// A slow sample of the selection on a target without history (far
	// above tgt's 100 ms) degrades nothing.
	runUseful(h.e.FlowOn(scope(other, 1), h.now()), h.now(), 200*time.Millisecond)
	if q := h.question(tgt, 1); q != "none" {
		t.Fatalf("another target's sample reopened tgt: %q", q)
	}
	// Within the ratio of its own history: nothing.
	runUseful(h.e.FlowOn(scope(tgt, 1), h.now()), h.now(), 120*time.Millisecond)
	if q := h.question(tgt, 1); q != "none" {
		t.Fatalf("a sample under 1.5× reopened: %q", q)
	}
	// Degraded against tgt's own history: tgt reopens, the aggregate
	// does not, and the next rank funds the pair trial.
	runUseful(h.e.FlowOn(scope(tgt, 1), h.now()), h.now(), 170*time.Millisecond)
	if q := h.question(tgt, 1); q != "pair" {
		t.Fatalf("degradation did not reopen tgt: %q", q)
	}
	agg()
	d := h.e.Rank(h.now(), h.req(tgt))
	if !d.Attempt.Trial() || d.Index != 1 {
		t.Fatalf("rank %d trial %v after degradation", d.Index, d.Attempt.Trial())
	}
	d.Attempt.Release(h.now())

	// A slow target's ordinary latency is no degradation of itself.
	h = incumbentAt(t, 2, other, 300*time.Millisecond)
	h.served(1, other, 4, 300*time.Millisecond)
	h.served(2, other, 6, 300*time.Millisecond)
	runUseful(h.e.FlowOn(scope(other, 1), h.now()), h.now(), 310*time.Millisecond)
	if q := h.question(other, 1); q != "none" {
		t.Fatalf("310 ms against 300 ms reopened: %q", q)
	}
	// The excess matters too: 1.5× of a fast history under +20 ms is not
	// a degradation.
	h = incumbentAt(t, 2, tgt, 10*time.Millisecond)
	h.served(1, tgt, 14, 10*time.Millisecond) // the sample does not move the block's mean past the band
	h.served(2, tgt, 6, 10*time.Millisecond)
	runUseful(h.e.FlowOn(scope(tgt, 1), h.now()), h.now(), 25*time.Millisecond)
	if q := h.question(tgt, 1); q != "none" {
		t.Fatalf("25 ms against 10 ms (+15 ms) reopened: %q", q)
	}
}

// Configured probes never settle a pair question, even when they are
// the pair's only (known) basis.
func TestProbesNeverSettlePairQuestion(t *testing.T) {
	tgt := target(1)
	h := incumbentAt(t, 2, tgt, 100*time.Millisecond)
	h.clk.Advance(score.BlockWidth)
	h.served(2, tgt, 4, 100*time.Millisecond) // qualified, usable, unpaired
	for range 4 {
		for n := 1; n <= 2; n++ {
			h.e.Probe(netx.TCP, node(n), h.now(), 10*time.Millisecond, true, 30*time.Second)
		}
		h.clk.Advance(time.Second)
	}
	ex := h.explain(tgt)
	if rel, ok := relationOf(ex, 1); !ok || rel.Basis != score.BasisProbeCohort {
		t.Fatalf("no probe relation: %+v", ex)
	}
	if m, _ := memberOf(ex, 1); m.Question != "pair" {
		t.Fatalf("a probe cohort settled the pair: %+v", m)
	}
}
