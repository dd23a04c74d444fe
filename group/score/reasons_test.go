package score_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// only is a request over every leaf with only leaf n (1-based) eligible.
func (h *eng) only(tgt netx.Addr, n int) *score.Request {
	r := h.req(tgt)
	for i := range r.Cands {
		r.Cands[i].Eligible = i == n-1
	}
	return r
}

func (h *eng) rankReq(r *score.Request) score.Decision {
	d := h.e.Rank(h.now(), r)
	if d.Attempt != nil {
		d.Attempt.Release(h.now())
	}
	return d
}

// Every reason is reachable, and each scenario's rank counts exactly it.
func TestReasonsReachable(t *testing.T) {
	tgt := target(1)
	cases := map[score.Reason]func(t *testing.T) (*eng, score.Decision){
		score.ColdExplore: func(t *testing.T) (*eng, score.Decision) {
			h := newEng(t, 3)
			return h, h.rankReq(h.req(tgt))
		},
		score.PeriodicExplore: func(t *testing.T) (*eng, score.Decision) {
			h := incumbent(t, tgt)
			h.served(1, tgt, 4, 100*time.Millisecond)
			h.clk.Advance(score.BlockWidth)
			h.served(2, tgt, 6, 50*time.Millisecond) // trained, unpaired: a pair question
			return h, h.rankReq(h.req(tgt))
		},
		score.IncumbentIneligible: func(t *testing.T) (*eng, score.Decision) {
			h := incumbent(t, tgt)
			return h, h.rankReq(h.only(tgt, 2))
		},
		score.FreshFailureBypass: func(t *testing.T) (*eng, score.Decision) {
			h := incumbent(t, tgt)
			h.e.FlowOn(scope(tgt, 1), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
			return h, h.rankReq(h.req(tgt))
		},
		score.InsufficientEvidenceHeld: func(t *testing.T) (*eng, score.Decision) {
			h := incumbent(t, tgt)
			h.clk.Advance(score.BlockWidth)
			h.served(2, tgt, 6, 50*time.Millisecond)
			return h, h.rank(tgt)
		},
		score.DirectionalTradeoffHeld: func(t *testing.T) (*eng, score.Decision) {
			h := incumbent(t, tgt)
			h.bulk(1, tgt, 4, 100*time.Millisecond, 1<<20, 1<<20)
			h.bulk(2, tgt, 6, 100*time.Millisecond, 2<<20, 512<<10)
			return h, h.rank(tgt)
		},
		score.IncumbentHeld: func(t *testing.T) (*eng, score.Decision) {
			h := incumbent(t, tgt)
			h.served(1, tgt, 4, 100*time.Millisecond)
			h.served(2, tgt, 6, 100*time.Millisecond)
			return h, h.rank(tgt)
		},
		score.ReliabilityWinner: func(t *testing.T) (*eng, score.Decision) {
			h := newEng(t, 2)
			h.served(1, tgt, 8, 100*time.Millisecond)
			// A targetless first choice (no walk) separated by reliability.
			return h, h.rankReq(h.req(netx.Addr{}))
		},
		score.PerformanceWinner: func(t *testing.T) (*eng, score.Decision) {
			h := incumbent(t, tgt)
			h.served(1, tgt, 4, 100*time.Millisecond)
			h.served(2, tgt, 6, 50*time.Millisecond)
			return h, h.rank(tgt)
		},
	}
	for r := score.ColdExplore; r < score.NumReasons; r++ {
		t.Run(r.String(), func(t *testing.T) {
			f := cases[r]
			if f == nil {
				t.Fatal("no scenario")
			}
			h, d := f(t)
			if d.Reason != r {
				t.Fatalf("reason %v, want %v", d.Reason, r)
			}
			st := h.stats(netx.TCP)
			if st.Reasons.Get(r) < 1 {
				t.Errorf("%v not counted: %+v", r, st.Reasons)
			}
		})
	}
}

// A scripted mix of ranks and flows: every authorized multi-candidate
// rank counts exactly one reason; peeks, retries, singletons and last
// resort count none.
func TestReasonsExactlyOnePerRank(t *testing.T) {
	h := newEng(t, 4)
	rng := rand.New(rand.NewPCG(1, 2))
	var want int64
	for i := range 2000 {
		tgt := target(rng.IntN(20))
		r := h.req(tgt)
		for j := range r.Cands {
			r.Cands[j].Eligible = rng.IntN(6) != 0
		}
		kind := rng.IntN(10)
		switch kind {
		case 0:
			r.Peek = true
		case 1:
			r.Retry = true
			r.Exclude = node(1)
		case 2:
			r.LastResort = true
		case 3:
			r.Cands = r.Cands[:1]
		}
		d := h.e.Rank(h.now(), r)
		authorized := kind > 3
		if d.Index >= 0 && authorized {
			want++
			if d.Reason == score.NoReason {
				t.Fatalf("rank %d: authorized multi-candidate rank without a reason", i)
			}
		} else if d.Reason != score.NoReason {
			t.Fatalf("rank %d (kind %d): neutral rank counted %v", i, kind, d.Reason)
		}
		if d.Attempt != nil {
			if f, err := d.Attempt.Begin(h.now()); err == nil {
				switch rng.IntN(4) {
				case 0:
					f.Fail(h.now(), score.Failure{Kind: score.TargetPath})
				case 1:
					f.Cancel(h.now())
				default:
					runUseful(f, h.now(), time.Duration(rng.IntN(100))*time.Millisecond)
				}
			}
		}
		h.clk.Advance(time.Duration(rng.IntN(2000)) * time.Millisecond)
	}
	if got := reasonTotal(h.stats(netx.TCP)); got != want {
		t.Fatalf("%d reasons counted for %d authorized ranks", got, want)
	}
}

func TestReasonsSwitchAndFlap(t *testing.T) {
	h := newEng(t, 3)
	tgt := target(1)
	h.rankReq(h.only(tgt, 1)) // first choice: no switch
	h.rankReq(h.only(tgt, 2)) // A → B
	h.rankReq(h.only(tgt, 1)) // B → A within eight: a flap
	st := h.stats(netx.TCP)
	if st.OrdinarySwitch != 2 || st.SwitchFlap != 1 {
		t.Fatalf("switches %d flaps %d, want 2 and 1", st.OrdinarySwitch, st.SwitchFlap)
	}
	h.rankReq(h.only(tgt, 2)) // A → B: returns to B, the prior winner, at once: a flap
	for range 8 {             // the spec's eight ordinary selections
		h.rankReq(h.only(tgt, 2))
	}
	h.rankReq(h.only(tgt, 1)) // B → A after eight selections: no flap
	st = h.stats(netx.TCP)
	if st.OrdinarySwitch != 4 || st.SwitchFlap != 2 {
		t.Fatalf("switches %d flaps %d, want 4 and 2", st.OrdinarySwitch, st.SwitchFlap)
	}
	// Another target has its own history: its first choice is no switch.
	h.rankReq(h.only(target(2), 3))
	if st := h.stats(netx.TCP); st.OrdinarySwitch != 4 {
		t.Fatalf("a first choice counted as a switch: %d", st.OrdinarySwitch)
	}
}

func TestReasonsAffectedCandidates(t *testing.T) {
	tgt := target(1)
	h := newEng(t, 3)
	h.served(1, tgt, 6, 10*time.Millisecond)
	r := h.req(tgt)
	r.Cands[2].Eligible = false
	h.rankReq(r)
	if st := h.stats(netx.TCP); st.DeadFiltered != 1 {
		t.Errorf("deadFiltered %d, want 1", st.DeadFiltered)
	}
	h.e.FlowOn(scope(tgt, 3), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
	h.rankReq(h.req(tgt))
	if st := h.stats(netx.TCP); st.FailStreakExcluded != 1 {
		t.Errorf("failStreakExcluded %d, want 1", st.FailStreakExcluded)
	}

	// The walk: leaf 1 trained, leaves 2 and 3 untrained.
	h = newEng(t, 3)
	h.served(1, tgt, 6, 10*time.Millisecond)
	d1 := h.e.Rank(h.now(), h.req(tgt)) // a trial, left unanswered
	d2 := h.e.Rank(h.now(), h.req(tgt)) // the first challenger is in flight: the other
	if !d1.Attempt.Trial() || !d2.Attempt.Trial() || d1.Index == d2.Index {
		t.Fatalf("trials %d/%v and %d/%v", d1.Index, d1.Attempt.Trial(), d2.Index, d2.Attempt.Trial())
	}
	if st := h.stats(netx.TCP); st.InFlight != 1 {
		t.Errorf("inFlight %d, want 1", st.InFlight)
	}
	f1, _ := d1.Attempt.Begin(h.now())
	f1.Fail(h.now(), score.Failure{Kind: score.UnknownPreSetup}) // a failed trial backs its member off
	f2, _ := d2.Attempt.Begin(h.now())
	f2.Cancel(h.now())
	d3 := h.e.Rank(h.now(), h.req(tgt))
	if st := h.stats(netx.TCP); st.ExploreBackedOff < 1 {
		t.Errorf("exploreBackedOff %d, want ≥ 1", st.ExploreBackedOff)
	}
	if d3.Attempt.Trial() {
		f3, _ := d3.Attempt.Begin(h.now())
		f3.Cancel(h.now()) // the third cold trial spends the allowance
	}
	h.rankReq(h.req(tgt))
	if st := h.stats(netx.TCP); st.BudgetBlocked < 1 {
		t.Errorf("budgetBlocked %d, want ≥ 1 (%+v)", st.BudgetBlocked, st.Budget)
	}
}
