package score_test

import (
	"errors"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health"
)

func TestPoolReplacesAfterThirdNodeFailure(t *testing.T) {
	h := newPool(t, 10)
	h.apply() // ranked 10, 9; rotation 1
	h.at(time.Minute)
	h.p.NodeFailed(node(10), h.now())
	h.p.NodeFailed(node(10), h.now())
	h.apply()
	if !h.isMember(10) {
		t.Fatal("replaced after the second node-wide failure")
	}
	h.p.NodeOK(node(10)) // the run restarts
	h.p.NodeFailed(node(10), h.now())
	h.p.NodeFailed(node(10), h.now())
	h.apply()
	if !h.isMember(10) {
		t.Fatal("replaced after two failures following a success")
	}
	h.p.NodeFailed(node(10), h.now())
	h.at(2 * time.Minute)
	h.apply()
	ranked, rot := h.members()
	wantSet(t, "ranked after the third failure", ranked, 9, 8)
	if rot != 1 || h.p.Capacity() != 3 {
		t.Fatalf("rotation %d, k %d: replacement changed the rest", rot, h.p.Capacity())
	}
	// Late reports of failures from before node 8 joined do not count.
	for range score.ReplaceAfter {
		h.p.NodeFailed(node(8), h.now().Add(-time.Second))
	}
	h.at(3 * time.Minute)
	h.apply()
	if !h.isMember(8) {
		t.Fatal("failures from before the member joined replaced it")
	}
}

func TestPoolReplacesOnHealthExclusion(t *testing.T) {
	h := newPool(t, 10)
	h.apply()
	nine := h.plan(score.DirectKey(node(9)))
	h.at(time.Minute)
	h.p.Excluded(node(9))
	h.cand(9).Eligible = false
	h.apply()
	ranked, _ := h.members()
	wantSet(t, "ranked after the exclusion", ranked, 10, 8)
	wantCancel(t, h.p.Begin(nine), score.Departed)

	// Without an eligible replacement the member stays.
	h = newPool(t, 4) // ranked 4, 3; rotation 1; node 2 free
	h.cand(2).Eligible = false
	h.apply()
	h.at(time.Minute)
	h.p.Excluded(node(4))
	h.apply()
	if !h.isMember(4) || h.isMember(2) {
		t.Fatal("an excluded member without an eligible replacement left, or an ineligible one came in")
	}
	// One becomes eligible: the pending replacement happens then.
	h.cand(2).Eligible = true
	h.at(2 * time.Minute)
	h.apply()
	if h.isMember(4) || !h.isMember(2) {
		t.Fatal("the pending replacement did not happen")
	}
}

func TestPoolAbsenceDoesNotRemoveDirectMember(t *testing.T) {
	h := newPool(t, 10)
	h.apply()
	all := h.cands
	h.cands = all[:8] // node 9 and 10 filtered from this resolution
	h.at(time.Minute)
	h.apply()
	if !h.isMember(10) || !h.isMember(9) {
		t.Fatal("filtered absence removed a member")
	}
}

func TestPoolNestedSlotsKeyedBySubgroupName(t *testing.T) {
	h := newPool(t, 1)
	h.cands = append(h.cands,
		score.Candidate{Subgroup: "asia", Node: node(20), Eligible: true, Utility: 5},
		score.Candidate{Subgroup: "eu", Node: node(21), Eligible: true, Utility: 4},
		score.Candidate{Subgroup: "asia", Node: node(30), Eligible: true, Utility: 9}, // the same slot
	)
	h.apply()
	if m := h.p.Members(); len(m) != 3 {
		t.Fatalf("members = %v, want node 1, asia, eu", len(m))
	}
	asia := h.plan(score.NestedKey("asia"))
	// The subgroup emits another representative: same slot, new leaf.
	h.cands[1].Node = node(22)
	h.at(time.Minute)
	h.apply()
	found := false
	for _, s := range h.p.Members() {
		if s.Subgroup == "asia" {
			found = true
			if s.Node != node(22) {
				t.Fatalf("asia's representative = %v, want node 22", s.Node)
			}
		}
	}
	if !found || len(h.p.Members()) != 3 {
		t.Fatalf("the representative change moved the slot: %d members", len(h.p.Members()))
	}
	if err := h.p.Begin(asia); err != nil {
		t.Fatalf("Begin through the same slot: %v", err)
	}
	if h.isMember(22) {
		t.Fatal("a representative is mistaken for a direct member")
	}
	// asia yields nothing; node 22 appears as a direct member: that is
	// not asia's representative, and asia's slot is withdrawn.
	h.cands = []score.Candidate{h.cands[0], h.cands[2],
		{Node: node(22), Eligible: true, Utility: 3}}
	h.at(2 * time.Minute)
	h.apply()
	if h.p.Contains(score.NestedKey("asia")) || !h.isMember(22) {
		t.Fatal("absent subgroup kept, or the direct member not admitted")
	}
	wantCancel(t, h.p.Begin(asia), score.Departed)
}

func TestPoolPlanBegin(t *testing.T) {
	h := newPool(t, 10)
	_, err := h.p.Plan(h.now(), score.DirectKey(node(10)))
	wantCancel(t, err, score.Uninitialized)
	h.demand(100)
	h.apply()
	if _, err := h.p.Plan(h.now(), score.DirectKey(node(5))); !errors.Is(err, score.ErrNotInPool) {
		t.Fatalf("Plan of a non-member = %v", err)
	}
	ten := h.plan(score.DirectKey(node(10)))
	if err := h.p.Begin(ten); err != nil {
		t.Fatalf("a fresh plan: %v", err)
	}
	// A membership change elsewhere does not invalidate node 10's plan.
	h.at(score.RotateEvery)
	h.apply()
	if err := h.p.Begin(ten); err != nil {
		t.Fatalf("plan of a surviving member after a change: %v", err)
	}
	// Reload: refused, even after the pool is initialized again.
	d := h.p.Projected()
	h.p.Reload()
	if h.p.Members() != nil || h.p.Capacity() != 0 {
		t.Fatal("Reload kept membership or capacity")
	}
	if got := h.p.Projected(); got != d {
		t.Fatalf("Reload changed demand %v → %v", d, got)
	}
	wantCancel(t, h.p.Begin(ten), score.Uninitialized)
	h.apply()
	wantCancel(t, h.p.Begin(ten), score.Uninitialized)
	if err := h.p.Begin(h.plan(score.DirectKey(node(10)))); err != nil {
		t.Fatalf("a fresh plan after the reload: %v", err)
	}
	// A plan of another pool is never this one's.
	other := newPool(t, 10)
	other.apply()
	wantCancel(t, h.p.Begin(other.plan(score.DirectKey(node(10)))), score.Uninitialized)
	wantCancel(t, h.p.Begin(score.Plan{}), score.Uninitialized)
}

func TestPoolEmptyApplyKeepsUninitialized(t *testing.T) {
	h := newPool(t, 0)
	h.apply()
	if h.p.Initialized() {
		t.Fatal("an Apply with no candidate initialized the pool")
	}
	var nobody health.NodeID
	h.p.NodeFailed(nobody, h.now())
	h.p.Excluded(nobody)
}

func BenchmarkPoolPlanBegin(b *testing.B) {
	h := newPool(b, 45)
	h.demand(1000)
	h.apply()
	k := score.DirectKey(node(45))
	at := h.now()
	b.ReportAllocs()
	for b.Loop() {
		pl, err := h.p.Plan(at, k)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.p.Begin(pl); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPoolApplyQuiet is an authorized Apply with nothing due: the
// per-selection cost of keeping the pool committed (50 candidates).
func BenchmarkPoolApplyQuiet(b *testing.B) {
	h := newPool(b, 50)
	h.demand(1000)
	h.apply()
	b.ReportAllocs()
	for b.Loop() {
		h.apply()
	}
}

// BenchmarkPoolRerank is a periodic rerank of 50 candidates: every Apply
// is five minutes after the previous one.
func BenchmarkPoolRerank(b *testing.B) {
	h := newPool(b, 50)
	h.demand(1000)
	at := h.now()
	b.ReportAllocs()
	for b.Loop() {
		h.p.Rerank(at, h.cands)
		at = at.Add(score.RerankEvery)
	}
}

func TestPoolRefillsWithdrawnSlotWhenEligible(t *testing.T) {
	h := newPool(t, 4)
	h.cands = append(h.cands, score.Candidate{Subgroup: "asia", Node: node(20), Eligible: true, Utility: 50})
	h.apply() // ranked asia, 4; rotation 1
	if !h.p.Contains(score.NestedKey("asia")) {
		t.Fatal("asia not ranked")
	}
	h.cand(2).Eligible, h.cand(3).Eligible = false, false
	h.cands = h.cands[:4] // asia yields nothing
	h.at(time.Minute)
	h.apply()
	if m := len(h.p.Members()); m != 2 || h.p.Capacity() != 3 {
		t.Fatalf("%d members, k %d: want asia withdrawn, no ineligible refill, k kept", m, h.p.Capacity())
	}
	h.cand(2).Eligible = true
	h.at(2 * time.Minute)
	h.apply()
	if !h.isMember(2) || len(h.p.Members()) != 3 {
		t.Fatal("the withdrawn capacity was not refilled once a candidate became eligible")
	}
}

func TestPoolPeekAndProjectCommitNothing(t *testing.T) {
	h := newPool(t, 10)
	peek := h.p.Peek(h.now(), h.cands)
	if len(peek) != 3 || h.p.Initialized() || h.p.Members() != nil {
		t.Fatalf("Peek before initialization = %d slots, initialized %v", len(peek), h.p.Initialized())
	}
	if _, err := h.p.Plan(h.now(), peek[0].Key); !errors.Is(err, score.ErrStalePlan) {
		t.Fatalf("a projection admitted a plan: %v", err)
	}
	h.apply()
	committed := h.p.Members()
	for i := range peek {
		if peek[i].Key != committed[i].Key || peek[i].Rotation != committed[i].Rotation {
			t.Fatalf("projection %v ≠ bootstrap %v", peek, committed)
		}
	}
	ten := h.plan(score.DirectKey(node(10)))
	// A projection ten minutes on rotates, reranks and drops node 10 …
	h.cand(10).Eligible = false
	h.cand(8).Utility = 100
	h.at(score.RotateEvery)
	proj := h.p.Project(h.now(), h.cands)
	in := func(ss []score.Slot, n int) bool {
		for _, s := range ss {
			if s.Node == node(n) {
				return true
			}
		}
		return false
	}
	if in(proj, 10) || !in(proj, 8) || in(proj, 1) {
		t.Fatalf("projection %v did not rerank and rotate", proj)
	}
	// … and commits none of it; Peek reads the committed membership.
	if !h.isMember(10) || h.isMember(8) || !h.isMember(1) || len(h.p.Peek(h.now(), h.cands)) != 3 || !in(h.p.Peek(h.now(), h.cands), 10) {
		t.Fatal("Project or Peek committed a change")
	}
	if err := h.p.Begin(ten); err != nil {
		t.Fatalf("Project moved the generation: %v", err)
	}
}

func TestPoolConcurrentPlansAndApplies(t *testing.T) {
	h := newPool(t, 20)
	h.apply()
	at := h.now()
	done := make(chan struct{})
	go func() { // the Apply side: reranks, failures, reloads
		defer close(done)
		for i := range 500 {
			at := at.Add(time.Duration(i) * time.Minute)
			h.p.Demand(at)
			h.p.NodeFailed(node(20-i%5), at)
			if i%97 == 0 {
				h.p.Reload()
			}
			h.p.Rerank(at, h.cands)
			_ = h.p.Project(at, h.cands)
		}
	}()
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		default:
		}
		pl, err := h.p.Plan(at, score.DirectKey(node(1+i%20)))
		if err != nil {
			if !errors.Is(err, score.ErrNotInPool) && !errors.Is(err, score.ErrStalePlan) {
				t.Fatalf("Plan: %v", err)
			}
			continue
		}
		if err := h.p.Begin(pl); err != nil && !errors.Is(err, score.ErrStalePlan) {
			t.Fatalf("Begin: %v", err)
		}
		_ = h.p.Members()
	}
}
