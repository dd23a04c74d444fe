package score_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// poolHarness drives one pool on a fake clock. Its candidates are
// node(1)…node(n) in declaration order, every one eligible, with utility
// i: the ranking is the reverse of the declaration order.
type poolHarness struct {
	t     testing.TB
	clk   *healthtest.Clock
	p     *score.Pool
	cands []score.Candidate
}

func newPool(t testing.TB, n int) *poolHarness {
	clk := healthtest.NewClock(healthtest.Epoch)
	h := &poolHarness{t: t, clk: clk, p: score.NewPool(clk, grp, netx.TCP)}
	for i := 1; i <= n; i++ {
		h.cands = append(h.cands, score.Candidate{Node: node(i), Eligible: true, Utility: float64(i)})
	}
	return h
}

func (h *poolHarness) now() time.Time { return h.clk.Now() }

// at advances the clock to the epoch plus d.
func (h *poolHarness) at(d time.Duration) {
	h.t.Helper()
	if gone := h.now().Sub(healthtest.Epoch); d < gone {
		h.t.Fatalf("clock at %v, asked for %v", gone, d)
	} else {
		h.clk.Advance(d - gone)
	}
}

func (h *poolHarness) apply() { h.p.Rerank(h.now(), h.cands) }

func (h *poolHarness) demand(starts int) {
	for range starts {
		h.p.Demand(h.now())
	}
}

func (h *poolHarness) cand(n int) *score.Candidate {
	for i := range h.cands {
		if h.cands[i].Node == node(n) && h.cands[i].Subgroup == "" {
			return &h.cands[i]
		}
	}
	h.t.Fatalf("no candidate node %d", n)
	return nil
}

func (h *poolHarness) winner(n int) {
	for i := range h.cands {
		h.cands[i].Winner = false
	}
	h.cand(n).Winner = true
}

// ranked and rotation return the committed members' node numbers.
func (h *poolHarness) members() (ranked []int, rotation int) {
	rotation = -1
	for _, s := range h.p.Members() {
		i := int(s.Node[2])<<8 | int(s.Node[3])
		if s.Rotation {
			if rotation >= 0 {
				h.t.Fatalf("two rotation slots: %d and %d", rotation, i)
			}
			rotation = i
			continue
		}
		ranked = append(ranked, i)
	}
	return ranked, rotation
}

func (h *poolHarness) isMember(n int) bool { return h.p.Contains(score.DirectKey(node(n))) }

func (h *poolHarness) plan(k score.Key) score.Plan {
	h.t.Helper()
	pl, err := h.p.Plan(h.now(), k)
	if err != nil {
		h.t.Fatalf("Plan: %v", err)
	}
	return pl
}

func wantSet(t *testing.T, what string, got []int, want ...int) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || g == w
		}
		if !found {
			t.Fatalf("%s = %v, want %v", what, got, want)
		}
	}
}

func wantCancel(t *testing.T, err error, reason score.CancelReason) {
	t.Helper()
	var ce *score.CancelError
	if !errors.As(err, &ce) || ce.Reason != reason {
		t.Fatalf("Begin = %v, want a %v cancellation", err, reason)
	}
	if !errors.Is(err, score.ErrStalePlan) || !errors.Is(err, context.Canceled) {
		t.Fatalf("%v is not ErrStalePlan and context.Canceled", err)
	}
}

func TestPoolSizeAtDemandBoundaries(t *testing.T) {
	for _, c := range []struct {
		d    float64
		n, k int
	}{
		// 45 unique candidates: ceiling min(25, ⌈√45⌉+1) = 8.
		{0, 45, 3}, {127, 45, 3}, {128, 45, 3}, {255, 45, 3}, {256, 45, 3},
		{383, 45, 3}, {384, 45, 4}, {511, 45, 4}, {512, 45, 5}, {639, 45, 5}, {640, 45, 6},
		{895, 45, 7}, {896, 45, 8}, {1023, 45, 8}, {1024, 45, 8}, {1e6, 45, 8},
		// 1,000: ceiling 25, reached at D = 24·128.
		{3071, 1000, 24}, {3072, 1000, 25}, {3200, 1000, 25}, {1e12, 1000, 25}, {math.Inf(1), 1000, 25},
		// ⌈√n⌉+1 at its steps: 16 → 5, 17 → 6, 5 → 4.
		{1e6, 16, 5}, {1e6, 17, 6}, {1e6, 5, 4}, {0, 5, 3},
		// Four or fewer: only the view's own members.
		{0, 4, 3}, {1e6, 4, 4}, {0, 3, 3}, {1e6, 2, 2}, {0, 1, 1}, {0, 0, 0},
		// Nonsense demand is no demand.
		{math.NaN(), 45, 3}, {-5, 45, 3},
	} {
		if got := score.PoolSize(c.d, c.n); got != c.k {
			t.Errorf("PoolSize(D=%v, n=%d) = %d, want %d", c.d, c.n, got, c.k)
		}
	}
}

func TestPoolDemandDecaysAndProjects(t *testing.T) {
	h := newPool(t, 45)
	h.demand(128)
	if d := h.p.Projected(); math.Abs(d-768) > 1e-6 {
		t.Fatalf("D after 128 starts = %v, want 768 (projected ×6 to the 30-minute half-life)", d)
	}
	h.at(score.DemandHalfLife)
	if d := h.p.Projected(); math.Abs(d-384) > 1e-6 {
		t.Fatalf("D a half-life later = %v, want 384", d)
	}
	h.apply()
	if k := h.p.Capacity(); k != 4 {
		t.Fatalf("bootstrap k at D=384 = %d, want 4", k)
	}
	if r, rot := h.members(); len(r) != 3 || rot < 0 {
		t.Fatalf("members = %v + rotation %d, want 3 ranked and a rotation slot", r, rot)
	}
}

func TestPoolBootstrap(t *testing.T) {
	h := newPool(t, 10)
	if h.p.Members() != nil || h.p.Initialized() {
		t.Fatal("members before any Apply")
	}
	h.cand(10).Eligible = false // eligibility before utility
	h.winner(5)                 // the first-choice winner gets a ranked slot
	h.apply()
	ranked, rot := h.members()
	wantSet(t, "ranked", ranked, 5, 9)
	if rot != 1 {
		t.Fatalf("rotation = %d, want node 1 (first in declaration order)", rot)
	}
	// Probe RTT breaks utility ties, unknown last.
	h = newPool(t, 5)
	for i := range h.cands {
		h.cands[i].Utility = 1
	}
	h.cand(2).ProbeRTT = 30 * time.Millisecond
	h.cand(4).ProbeRTT = 20 * time.Millisecond
	h.apply()
	ranked, rot = h.members()
	wantSet(t, "ranked on ties", ranked, 4, 2)
	if rot != 1 {
		t.Fatalf("rotation = %d, want 1", rot)
	}
}

func TestPoolSmallViewHasNoRotation(t *testing.T) {
	h := newPool(t, 3)
	h.apply()
	ranked, rot := h.members()
	wantSet(t, "members", ranked, 1, 2, 3)
	if rot >= 0 {
		t.Fatalf("rotation slot %d in a view no larger than k", rot)
	}
}

func TestPoolRotatesAtTenMinutes(t *testing.T) {
	h := newPool(t, 10)
	h.apply() // ranked 10, 9; rotation 1
	old := h.plan(score.DirectKey(node(1)))
	h.at(score.RotateEvery - time.Nanosecond)
	h.apply()
	if _, rot := h.members(); rot != 1 {
		t.Fatalf("rotation before ten minutes = %d, want 1", rot)
	}
	if err := h.p.Begin(old); err != nil {
		t.Fatalf("Begin before rotation: %v", err)
	}
	h.at(score.RotateEvery)
	h.apply()
	ranked, rot := h.members()
	wantSet(t, "ranked", ranked, 10, 9)
	if rot != 2 {
		t.Fatalf("rotation at ten minutes = %d, want 2", rot)
	}
	for _, s := range h.p.Members() {
		if s.Rotation && !s.Since.Equal(h.now()) {
			t.Fatalf("rotation interval starts %v, want %v", s.Since, h.now())
		}
	}
	wantCancel(t, h.p.Begin(old), score.Departed)
	// The rotation scans on in declaration order, skipping ranked members.
	for i, want := range []int{3, 4, 5, 6, 7, 8, 1, 2} {
		h.at(score.RotateEvery * time.Duration(i+2))
		h.apply()
		if _, rot := h.members(); rot != want {
			t.Fatalf("rotation %d = %d, want %d", i+2, rot, want)
		}
	}
}

func TestPoolRotationWinnerTradesPlaces(t *testing.T) {
	h := newPool(t, 10)
	h.winner(10)
	h.apply() // ranked 10, 9; rotation 1
	nine := h.plan(score.DirectKey(node(9)))
	h.at(time.Minute)
	h.winner(1)
	h.apply()
	ranked, rot := h.members()
	wantSet(t, "ranked after the trade", ranked, 10, 1)
	if rot != 9 {
		t.Fatalf("rotation after the trade = %d, want the displaced 9", rot)
	}
	if err := h.p.Begin(nine); err != nil {
		t.Fatalf("a trade keeps membership, Begin = %v", err)
	}
	// Ten minutes after node 1 entered, expiry does not evict the winner;
	// node 9's fresh interval runs from the trade.
	h.at(score.RotateEvery)
	h.apply()
	ranked, rot = h.members()
	wantSet(t, "ranked at 10 min", ranked, 10, 1)
	if rot != 9 {
		t.Fatalf("rotation at 10 min = %d, want 9 (fresh interval)", rot)
	}
	h.at(score.RotateEvery + time.Minute)
	h.apply()
	if ranked, rot = h.members(); rot == 9 || !h.isMember(1) {
		t.Fatalf("at 11 min ranked %v rotation %d, want 9 rotated out and 1 kept", ranked, rot)
	}
}

func TestPoolRerankEveryFiveMinutes(t *testing.T) {
	h := newPool(t, 10)
	h.apply() // ranked 10, 9
	nine := h.plan(score.DirectKey(node(9)))
	h.cand(8).Utility = 100
	h.at(score.RerankEvery - time.Nanosecond)
	h.apply()
	ranked, _ := h.members()
	wantSet(t, "ranked before the rerank", ranked, 10, 9)
	h.at(score.RerankEvery)
	h.apply()
	ranked, rot := h.members()
	wantSet(t, "ranked at five minutes", ranked, 8, 10)
	if rot != 1 {
		t.Fatalf("the rerank moved the rotation slot to %d", rot)
	}
	wantCancel(t, h.p.Begin(nine), score.Departed)
	// The next rerank is five minutes after this one.
	h.cand(7).Utility = 200
	h.at(2*score.RerankEvery - time.Nanosecond)
	h.apply()
	if h.isMember(7) {
		t.Fatal("reranked before the next five minutes")
	}
	h.at(2 * score.RerankEvery)
	h.apply()
	if !h.isMember(7) {
		t.Fatal("no rerank at ten minutes")
	}
}

func TestPoolGrowthWaitsForTheRerank(t *testing.T) {
	h := newPool(t, 45)
	h.apply()
	if k := h.p.Capacity(); k != 3 {
		t.Fatalf("k = %d, want 3", k)
	}
	h.at(time.Minute)
	h.demand(512) // D = 3072 now
	h.apply()
	if k := h.p.Capacity(); k != 3 || len(h.p.Members()) != 3 {
		t.Fatalf("k = %d before the rerank, want 3", k)
	}
	h.at(score.RerankEvery)
	h.apply()
	if k, m := h.p.Capacity(), len(h.p.Members()); k != 8 || m != 8 {
		t.Fatalf("k = %d with %d members at the rerank, want 8 (the ceiling for 45)", k, m)
	}
	if _, rot := h.members(); rot < 0 {
		t.Fatal("no rotation slot after growth")
	}
}

func TestPoolShrinksOnlyByTwo(t *testing.T) {
	// D = 1200 → k = 10 of 1,000 candidates; it decays with a five-minute
	// half-life: below 1152 (k 9) after 18 s, below 1024 (k 8) after 69 s.
	h := newPool(t, 1000)
	h.demand(200)
	h.apply()
	if k := h.p.Capacity(); k != 10 {
		t.Fatalf("k = %d, want 10", k)
	}
	h.at(30 * time.Second)
	h.apply()
	if k := h.p.Capacity(); k != 10 {
		t.Fatalf("k = %d after a fall of one, want 10", k)
	}
	h.at(70 * time.Second)
	h.apply()
	if k, m := h.p.Capacity(), len(h.p.Members()); k != 8 || m != 8 {
		t.Fatalf("k = %d with %d members after a fall of two, want 8 at once", k, m)
	}

	// A fall of one at a periodic rerank keeps k too.
	h = newPool(t, 1000)
	h.demand(200)
	h.apply()
	h.at(score.RerankEvery)
	h.demand(83) // 100 decayed + 83 → D = 1098: k 9
	h.apply()
	if k := h.p.Capacity(); k != 10 {
		t.Fatalf("k = %d after a rerank demanding one less, want 10", k)
	}
}

func TestPoolRotationWithNobodyToRotateIn(t *testing.T) {
	h := newPool(t, 4)
	h.apply() // ranked 4, 3; rotation 1; node 2 free
	h.at(6 * time.Minute)
	h.apply() // a rerank: the next is due at 11 min
	all := h.cands
	h.cands = []score.Candidate{all[0], all[2], all[3]} // node 2 filtered
	h.at(score.RotateEvery)
	h.apply()
	if _, rot := h.members(); rot != 1 {
		t.Fatalf("rotation = %d, want 1 kept with nobody to rotate in", rot)
	}
	h.cands = all
	h.at(score.RotateEvery + time.Second)
	h.apply()
	if _, rot := h.members(); rot != 1 {
		t.Fatalf("rotation = %d before the new interval ended, want 1", rot)
	}
	h.at(2 * score.RotateEvery)
	h.apply()
	if _, rot := h.members(); rot != 2 {
		t.Fatalf("rotation = %d at the new interval's end, want 2", rot)
	}
}
