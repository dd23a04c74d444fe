package score_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

func TestBudgetReloadKeepsCurrency(t *testing.T) {
	h := newBudget(t, 5) // B = 4
	h.earn(kV4, 40)      // E = 2.5
	h.trial(kV4, false, qual(1), score.TrialInconclusive)
	h.b.Reload(members(17))
	l := h.ledger(kV4)
	if l.Earned != 2.5 || l.Spent != 1 || l.Members != 5 || l.ColdAllowance != 4 || l.Counts.Originals != 40 {
		t.Fatalf("after reload: %+v, want E 2.5, V 1 and the frozen n 5, B 4", l)
	}
	// A new family scope of the grown group freezes the new n.
	h.b.Earn(kV6)
	if l := h.ledger(kV6); l.Members != 17 || l.ColdAllowance != 6 {
		t.Fatalf("new scope: %+v", l)
	}
	// Deleting the group ends the lifetime.
	h.b.Reload(nil)
	if _, ok := h.b.Ledger(kV4); ok {
		t.Fatal("a deleted group's scope survived")
	}
	h.b.Earn(kV4)
	if _, ok := h.b.Ledger(kV4); ok {
		t.Fatal("a non-member group earned a scope")
	}
	h.b.Reload(members(5))
	if _, err := h.b.Reserve(kV4, false, qual(1)); err != nil {
		t.Fatal(err)
	}
	if l := h.ledger(kV4); l.Earned != 0 || l.Spent != 0 {
		t.Fatalf("re-created group inherited %+v", l)
	}
}

func TestBudgetReloadForgetsYield(t *testing.T) {
	h := newBudget(t, 4)
	h.earn(kV4, 64)
	h.trial(kV4, true, qual(1), score.TrialFailed)
	h.trial(kV4, true, qual(2), score.TrialFailed)
	h.refused(kV4, true, qual(3), score.ErrPaused)
	h.b.Reload(members(4))
	h.reserve(kV4, true, qual(3))
	h.reserve(kV4, true, qual(4))
	// The backoff of a retained member stays.
	h.refused(kV4, true, qual(1), score.ErrBackedOff)
}

// replace swaps node 1 for node 9 in a four-member group.
func replaced() []score.Member {
	ms := members(4)
	ms[0].Node = node(9)
	return ms
}

func TestRemovedMembersDoNotMoveFunding(t *testing.T) {
	for _, c := range []struct {
		name   string
		reload []score.Member
		again  error // a second trial of the same question
		paused bool
	}{
		{"retained", members(4), score.ErrInFlight, true},
		{"removed", replaced(), score.ErrNotMember, false},
		{"new incarnation", func() []score.Member { ms := members(4); ms[0].Incarnation = 2; return ms }(), nil, false},
	} {
		h := newBudget(t, 4)
		h.earn(kV4, 64)
		rs := []score.Reservation{h.reserve(kV4, true, pair(1, 1)), h.reserve(kV4, true, pair(1, 2))}
		for _, r := range rs {
			if err := h.b.Begin(r); err != nil {
				t.Fatal(err)
			}
		}
		unbegun := h.reserve(kV4, true, pair(1, 3))
		h.b.Reload(c.reload)
		// Begun trials stay in flight across the reload and settle after it.
		if r, err := h.b.Reserve(kV4, true, pair(1, 1)); !errors.Is(err, c.again) {
			t.Errorf("%s: the same question again: %v, want %v", c.name, err, c.again)
		} else if err == nil {
			h.b.Release(r)
		}
		for _, r := range rs {
			h.b.Settle(r, score.TrialFailed)
		}
		l := h.ledger(kV4)
		if l.Counts.Failed != 2 {
			t.Errorf("%s: historical failures %d, want 2", c.name, l.Counts.Failed)
		}
		_, err := h.b.Reserve(kV4, true, qual(2))
		if paused := errors.Is(err, score.ErrPaused); paused != c.paused {
			t.Errorf("%s: paused = %v (%v), want %v", c.name, paused, err, c.paused)
		}
		if !c.paused {
			// The departed member's unbegun reservation was refunded at reload.
			if err := h.b.Begin(unbegun); err == nil {
				t.Errorf("%s: a departed member's reservation began", c.name)
			}
			if l.Reserved != 0 || l.Failures != 0 {
				t.Errorf("%s: ledger %+v", c.name, l)
			}
		}
	}
}

// TestRemovedMembersDoNotAccelerate: a departed member's successful
// trials settling after reload do not earn the busy share for the others.
func TestRemovedMembersDoNotAccelerate(t *testing.T) {
	for _, removed := range []bool{false, true} {
		h := newBudget(t, 4)
		h.earn(kV4, 64)
		var rs []score.Reservation
		for i := range 3 {
			r := h.reserve(kV4, false, pair(1, i))
			if err := h.b.Begin(r); err != nil {
				t.Fatal(err)
			}
			rs = append(rs, r)
		}
		if removed {
			h.b.Reload(replaced())
		} else {
			h.b.Reload(members(4))
		}
		for _, r := range rs {
			h.b.Settle(r, score.TrialSucceeded)
		}
		h.busy()
		want := 1.0 / 8
		if removed {
			want = 1.0 / 16
		}
		if d := h.delta(kV4); d != want {
			t.Errorf("removed=%v: earned %v per original, want %v", removed, d, want)
		}
	}
}

// TestBudgetInequalityProperty drives random sequences of every path —
// earning, reserving, beginning, releasing, settling, expiry, pauses,
// backoff, walks and reloads — and checks the books after each step.
func TestBudgetInequalityProperty(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		h := newBudget(t, 1+rng.IntN(12))
		keys := []score.BudgetKey{kV4, kV6}
		var held []score.Reservation
		cfg := members(12)
		for step := range 3000 {
			k := keys[rng.IntN(2)]
			switch op := rng.IntN(100); {
			case op < 30:
				h.b.Earn(keys[:1+rng.IntN(2)]...)
			case op < 50:
				tr := score.Trial{Node: node(1 + rng.IntN(12)), Question: score.Question(rng.IntN(4)), Target: target(rng.IntN(3))}
				usable := rng.IntN(2) == 0
				wait := h.b.Wait(k, usable, tr)
				r, err := h.b.Reserve(k, usable, tr)
				if err != wait {
					t.Fatalf("seed %d step %d: Wait read %v, Reserve answered %v", seed, step, wait, err)
				}
				if err == nil {
					held = append(held, r)
				}
			case op < 55:
				cands := make([]score.Challenger, 1+rng.IntN(6))
				for i := range cands {
					cands[i] = score.Challenger{Node: node(1 + rng.IntN(12)), Question: score.Question(rng.IntN(4)), Target: target(rng.IntN(3)), Trained: rng.IntN(2) == 0, Progress: rng.IntN(3)}
				}
				if res := h.b.Walk(k, score.Selection{Usable: rng.IntN(2) == 0, Completions: rng.IntN(4)}, cands); res.Admitted >= 0 {
					held = append(held, res.Reservation)
				}
			case op < 90 && len(held) > 0:
				i := rng.IntN(len(held))
				r := held[i]
				switch rng.IntN(4) {
				case 0, 1:
					_ = h.b.Begin(r)
				case 2:
					h.b.Release(r)
					held = append(held[:i], held[i+1:]...)
				default:
					h.b.Settle(r, score.TrialOutcome(1+rng.IntN(4)))
					held = append(held[:i], held[i+1:]...)
				}
			case op < 95:
				h.clk.Advance(time.Duration(rng.Int64N(int64(20 * time.Minute))))
			case op < 97:
				h.b.Failed(k, node(1+rng.IntN(12)))
				h.b.Recovered(k, node(1+rng.IntN(12)), netx.Addr{})
			default:
				ms := []score.Member{}
				for _, m := range cfg {
					if rng.IntN(4) > 0 {
						m.Incarnation += uint64(rng.IntN(2))
						ms = append(ms, m)
					}
				}
				h.b.Reload(ms)
			}
			if err := h.b.CheckLedgers(); err != nil {
				t.Fatalf("seed %d step %d: %v", seed, step, err)
			}
			for _, k := range keys {
				if l, ok := h.b.Ledger(k); ok {
					if l.Spent+l.Reserved > int64(l.ColdAllowance)+int64(l.Earned) {
						t.Fatalf("seed %d step %d: V + R > B + ⌊E⌋: %+v", seed, step, l)
					}
					if l.Earned-float64(max(0, l.Spent-int64(l.ColdAllowance))) > score.CreditCap {
						t.Fatalf("seed %d step %d: unspent credit above the cap: %+v", seed, step, l)
					}
				}
			}
		}
	}
}

func TestDemandKeptAcrossReload(t *testing.T) {
	h := newBudget(t, 2)
	for range 100 {
		h.b.Earn(kV4, kV6) // one original, two family scopes: counted once
	}
	if d := h.b.Demand(grp, netx.TCP); d != 100 {
		t.Fatalf("demand %v, want 100", d)
	}
	h.clk.Advance(score.BusinessHalfLife)
	h.b.Reload(members(3))
	if d := h.b.Demand(grp, netx.TCP); math.Abs(d-50) > 1e-9 {
		t.Fatalf("demand after a half-life and a reload %v, want 50", d)
	}
	if d := h.b.Demand(grp, netx.UDP); d != 0 {
		t.Fatalf("UDP demand %v", d)
	}
	h.b.Reload(nil)
	if d := h.b.Demand(grp, netx.TCP); d != 0 {
		t.Fatalf("a deleted group kept demand %v", d)
	}
}

// TestBudgetConcurrent runs every path from several goroutines under the
// race detector; the books still balance.
func TestBudgetConcurrent(t *testing.T) {
	h := newBudget(t, 8)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				h.b.Earn(kV4, kV6)
				r, err := h.b.Reserve(kV4, i%2 == 0, pair(1+g, i%5))
				if err != nil {
					continue
				}
				switch i % 3 {
				case 0:
					h.b.Release(r)
				default:
					if h.b.Begin(r) == nil {
						h.b.Settle(r, score.TrialOutcome(1+i%4))
					}
				}
				if i%100 == 0 {
					h.b.Reload(members(8))
				}
			}
		}()
	}
	wg.Wait()
	if err := h.b.CheckLedgers(); err != nil {
		t.Fatal(err)
	}
}
