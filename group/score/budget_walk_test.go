package score_test

import (
	"errors"
	"testing"
	"time"

	"switchyard/group/score"
)

func cand(n int, q score.Question) score.Challenger {
	return score.Challenger{Node: node(n), Question: q, Target: target(1)}
}

func TestWalkOrder(t *testing.T) {
	h := newBudget(t, 6)
	h.earn(kV4, 16*8)
	sel := score.Selection{Usable: true, Completions: 10}
	// Untrained first, then progress, then least recently begun, the
	// probe rank only among never-selected members.
	cs := []score.Challenger{
		{Node: node(1), Question: score.Pair, Target: target(1), Trained: true, Progress: 3},
		{Node: node(2), Question: score.Pair, Target: target(1), Trained: true, Progress: 1, ProbeRank: 0},
		{Node: node(3), Question: score.Pair, Target: target(1), Trained: true, Progress: 1, ProbeRank: 1},
		{Node: node(4), Question: score.Pair, Target: target(1), Trained: false},
	}
	// Node 2 was selected (begun) before; node 3 never was.
	h.clk.Advance(time.Minute)
	h.trial(kV4, true, pair(2, 9), score.TrialSucceeded)
	res := h.b.Walk(kV4, sel, cs)
	got := []int{}
	for _, c := range cs {
		got = append(got, int(c.Node[3]))
	}
	if want := []int{4, 1, 3, 2}; !equal(got, want) {
		t.Fatalf("dispatch order %v, want %v", got, want)
	}
	if res.Admitted != 0 || res.Wait != nil {
		t.Fatalf("walk %+v", res)
	}
	// Recency advances only at begin: the unbegun reservation of node 4
	// leaves it first, and it now reads in flight; the next is admitted.
	res = h.b.Walk(kV4, sel, cs)
	if cs[0].Node != node(4) || res.Admitted != 1 || res.InFlight != 1 || !errors.Is(res.Wait, score.ErrInFlight) {
		t.Fatalf("second walk %+v, first %v", res, cs[0].Node)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestWalkRefusals(t *testing.T) {
	h := newBudget(t, 4) // B = 4, nothing earned
	sel := score.Selection{Completions: 5}
	h.reserve(kV4, false, pair(1, 1))                  // node 1 in flight
	h.trial(kV4, false, pair(2, 7), score.TrialFailed) // node 2 backed off
	h.reserve(kV4, false, pair(3, 5))
	// One credit left: node 3 is admitted after 1 (in flight) and 2 (backed off).
	cs := []score.Challenger{cand(1, score.Pair), cand(2, score.Pair), cand(3, score.Pair), cand(4, score.Pair)}
	cs[2].Trained, cs[3].Trained = true, true
	res := h.b.Walk(kV4, sel, cs)
	if res.Admitted != 2 || cs[2].Node != node(3) || res.InFlight != 1 || res.BackedOff != 1 || !errors.Is(res.Wait, score.ErrInFlight) {
		t.Fatalf("walk %+v", res)
	}
	// No credit: the budget refusal ends the walk, every later candidate
	// is budget-blocked, and in-flight members still read in flight.
	cs = []score.Challenger{cand(4, score.Pair), cand(1, score.Pair), {Node: node(4), Question: score.Availability, Target: target(1)}}
	res = h.b.Walk(kV4, sel, cs)
	if res.Admitted != -1 || res.BudgetBlocked != 2 || res.InFlight != 1 || !errors.Is(res.Wait, score.ErrNoCredit) {
		t.Fatalf("exhausted walk %+v", res)
	}
	if l := h.ledger(kV4); l.Reserved != 3 {
		t.Fatalf("a refused walk reserved: %+v", l)
	}
}

func TestWalkCompletionsRule(t *testing.T) {
	h := newBudget(t, 4)
	h.earn(kV4, 64)
	// Cold exploration waits for the selection's first completion.
	cs := []score.Challenger{cand(1, score.Qualification)}
	if res := h.b.Walk(kV4, score.Selection{}, cs); res.Admitted != -1 {
		t.Fatalf("dispatched before the selection had a completion: %+v", res)
	}
	// Completions plus unfinished work (its own trials included) must
	// stay below the selection's.
	if res := h.b.Walk(kV4, score.Selection{Completions: 1}, cs); res.Admitted != 0 {
		t.Fatalf("not dispatched: %+v", res)
	}
	cs = []score.Challenger{cand(1, score.Pair)}
	if res := h.b.Walk(kV4, score.Selection{Completions: 1}, cs); res.Admitted != -1 {
		t.Fatalf("dispatched beside an unfinished trial: %+v", res)
	}
	cs = []score.Challenger{{Node: node(2), Question: score.Qualification, Completions: 2, Unfinished: 1}}
	if res := h.b.Walk(kV4, score.Selection{Completions: 3}, cs); res.Admitted != -1 {
		t.Fatalf("dispatched at the selection's completions: %+v", res)
	}
	// Recovery is exempt.
	cs = []score.Challenger{{Node: node(2), Question: score.Recovery, Target: target(1), Completions: 9}}
	if res := h.b.Walk(kV4, score.Selection{}, cs); res.Admitted != 0 {
		t.Fatalf("recovery not dispatched: %+v", res)
	}
}

// BenchmarkReserveRelease is one reservation refunded unbegun.
func BenchmarkReserveRelease(b *testing.B) {
	h := newBudget(b, 10)
	tr := pair(1, 1)
	b.ReportAllocs()
	for b.Loop() {
		r, err := h.b.Reserve(kV4, false, tr)
		if err != nil {
			b.Fatal(err)
		}
		h.b.Release(r)
	}
}

// BenchmarkReserveBegin is one funded trial's budget cost with the 16
// originals that earn it at q = 16: Earn ×16, Reserve, Begin, Settle.
func BenchmarkReserveBegin(b *testing.B) {
	h := newBudget(b, 10)
	tr := qual(1)
	b.ReportAllocs()
	for b.Loop() {
		for range score.QuietShare {
			h.b.Earn(kV4)
		}
		r, err := h.b.Reserve(kV4, false, tr)
		if err != nil {
			b.Fatal(err)
		}
		if err := h.b.Begin(r); err != nil {
			b.Fatal(err)
		}
		h.b.Settle(r, score.TrialInconclusive)
	}
}

// BenchmarkEarn is one original start counted in one scope.
func BenchmarkEarn(b *testing.B) {
	h := newBudget(b, 10)
	b.ReportAllocs()
	for b.Loop() {
		h.b.Earn(kV4)
	}
}

// BenchmarkWalk is one dispatch walk over 50 candidates that ends in a
// budget refusal after a reservation is released.
func BenchmarkWalk(b *testing.B) {
	h := newBudget(b, 50)
	cs := make([]score.Challenger, 50)
	for i := range cs {
		cs[i] = score.Challenger{Node: node(i + 1), Question: score.Qualification, Progress: i % 3}
	}
	sel := score.Selection{Usable: true, Completions: 4}
	b.ReportAllocs()
	for b.Loop() {
		res := h.b.Walk(kV4, sel, cs)
		if res.Admitted < 0 {
			b.Fatal("not admitted")
		}
		h.b.Release(res.Reservation)
	}
}

// TestWalkBudgetRefusalEnds: after a budget refusal no later candidate is
// funded, not even one the pause would not refuse.
func TestWalkBudgetRefusalEnds(t *testing.T) {
	h := newBudget(t, 8)
	h.earn(kV4, 16*8)
	h.trial(kV4, true, qual(1), score.TrialFailed)
	h.trial(kV4, true, qual(2), score.TrialFailed)
	cs := []score.Challenger{cand(3, score.Qualification), cand(4, score.Recovery)}
	res := h.b.Walk(kV4, score.Selection{Usable: true, Completions: 1}, cs)
	if res.Admitted != -1 || res.BudgetBlocked != 2 || !errors.Is(res.Wait, score.ErrPaused) {
		t.Fatalf("walk %+v", res)
	}
	// Alone, the recovery trial is funded: the pause spares it.
	res = h.b.Walk(kV4, score.Selection{Usable: true, Completions: 1}, cs[1:])
	if res.Admitted != 0 {
		t.Fatalf("recovery walk %+v", res)
	}
}
