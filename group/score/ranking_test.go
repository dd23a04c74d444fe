package score_test

import (
	"math"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// peek returns the readonly decision and the candidates' utilities.
func (h *eng) peek(tgt netx.Addr) (int, []float64) {
	r := h.req(tgt)
	r.Peek = true
	d := h.e.Rank(h.now(), r)
	u := make([]float64, len(r.Cands))
	for i := range r.Cands {
		u[i] = r.Cands[i].Utility
	}
	return d.Index, u
}

// Probe RTT and response latency are normalized each in its own scope:
// leaf 1 is twice as fast by probe (1 vs 2 ms) and 40 % slower by
// response (100 vs 60 ms). Pooled as milliseconds leaf 2 would win
// (101 vs 62); normalized, leaf 1's probe lead outweighs.
func TestRankMetricsNormalizedInOwnScope(t *testing.T) {
	h := newEng(t, 2)
	tgt := target(1)
	h.clk.Advance(time.Second)
	h.e.Probe(netx.TCP, node(1), h.now(), time.Millisecond, true, 30*time.Second)
	h.e.Probe(netx.TCP, node(2), h.now(), 2*time.Millisecond, true, 30*time.Second)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(2, tgt, 4, 60*time.Millisecond)
	i, u := h.peek(tgt)
	if i != 0 || u[0] <= u[1] {
		t.Fatalf("chose %d with utilities %v, want leaf 1", i, u)
	}
}

// A metric keeps full confidence for 60 s, loses it to 120 s and then
// no longer counts at all.
func TestRankPerfConfidenceAndExpiry(t *testing.T) {
	h := newEng(t, 2)
	tgt := target(1)
	h.served(1, tgt, 4, 50*time.Millisecond)
	h.served(2, tgt, 4, 100*time.Millisecond)
	diff := func() float64 { _, u := h.peek(tgt); return u[0] - u[1] }
	h.clk.Advance(30 * time.Second)
	d30 := diff()
	h.clk.Advance(30 * time.Second)
	d60 := diff()
	h.clk.Advance(30 * time.Second)
	d90 := diff()
	h.clk.Advance(31 * time.Second)
	d121 := diff()
	if d30 <= 0.01 || math.Abs(d60-d30) > 1e-4 || d90 >= d60-0.01 || d90 <= 0.01 || math.Abs(d121) > 1e-4 {
		t.Fatalf("utility leads at 30/60/90/121 s: %v %v %v %v", d30, d60, d90, d121)
	}
}

// The performance heuristic is a four-observation weighted mean, newest
// weighted 4, 3, 2, 1: leaf 1's 5000, 50, 50, 50, 500 ms (newest last)
// reads 230 ms — not the latest 500, not the plain mean, and the fifth,
// oldest observation no longer counts.
func TestRankWeightedMeanInertia(t *testing.T) {
	for _, c := range []struct {
		other time.Duration
		win   int
	}{{250 * time.Millisecond, 0}, {200 * time.Millisecond, 1}} {
		h := newEng(t, 2)
		tgt := target(1)
		for _, l := range []time.Duration{5000, 50, 50, 50, 500} {
			h.served(1, tgt, 1, l*time.Millisecond)
			h.served(2, tgt, 1, c.other)
			h.clk.Advance(time.Second)
		}
		if i, u := h.peek(tgt); i != c.win {
			t.Errorf("against %v: chose %d (%v), want %d", c.other, i, u, c.win)
		}
	}
}

// A candidate in unresolved hard failure is not chosen while a clean one
// exists; with every candidate failed one is still served; the retry's
// excluded node never is.
func TestRankEligibility(t *testing.T) {
	h := newEng(t, 2)
	tgt := target(1)
	h.served(1, tgt, 8, 10*time.Millisecond)
	h.served(2, tgt, 1, 500*time.Millisecond)
	h.e.FlowOn(scope(tgt, 1), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
	if d := h.rank(tgt); d.Index != 1 { // after the funded recovery trials of leaf 1
		t.Fatalf("chose %d, want the clean leaf 2", d.Index)
	}
	h.e.FlowOn(scope(tgt, 2), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
	if d := h.rankReq(h.req(tgt)); d.Index < 0 {
		t.Fatal("every candidate failed: nothing served")
	}
	r := h.req(tgt)
	r.Retry, r.Exclude = true, node(1)
	r.Cands[1].Eligible = false
	if d := h.rankReq(r); d.Index != -1 {
		t.Fatalf("retry chose %d, the excluded node", d.Index)
	}
}

// A node-scoped failure is an unresolved failure on every target of the
// node; a target-scoped one only on its own.
func TestRankFailureScope(t *testing.T) {
	h := newEng(t, 2)
	for _, tg := range []netx.Addr{target(1), target(2)} {
		h.served(1, tg, 8, 10*time.Millisecond)
		h.served(2, tg, 2, 500*time.Millisecond)
	}
	h.e.FlowOn(scope(target(1), 1), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
	if i, _ := h.peek(target(2)); i != 0 {
		t.Fatalf("a target failure moved another target: %d", i)
	}
	h.e.FlowOn(scope(target(1), 1), h.now()).Fail(h.now(), score.Failure{Kind: score.SharedCarrier})
	if i, _ := h.peek(target(2)); i != 1 {
		t.Fatalf("a node failure left another target on the node: %d", i)
	}
}

// With every member of the serving pool unavailable, a flow is served by
// an available non-member, not refused.
func TestRankServesOutsideAnUnavailablePool(t *testing.T) {
	h := newEng(t, 9) // a pool of three
	d := h.rankReq(h.req(netx.Addr{}))
	if d.Index < 0 {
		t.Fatal("no selection")
	}
	r := h.req(netx.Addr{})
	for i := range 3 {
		r.Cands[i].Eligible = false // the bootstrap's ranked members: declaration order on cold ties
	}
	r.Cands[d.Index].Eligible = false
	for range 3 {
		d2 := h.e.Rank(h.now(), r)
		if d2.Index < 0 || !r.Cands[d2.Index].Eligible {
			t.Fatalf("chose %d", d2.Index)
		}
		f, err := d2.Attempt.Begin(h.now())
		if err != nil {
			t.Fatalf("Begin: %v", err)
		}
		f.Cancel(h.now())
	}
}
