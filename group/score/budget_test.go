package score_test

import (
	"errors"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

var (
	kV4 = score.BudgetKey{Group: grp, Network: netx.TCP, Family: netx.V4}
	kV6 = score.BudgetKey{Group: grp, Network: netx.TCP, Family: netx.V6}
)

type bharness struct {
	t   testing.TB
	clk *healthtest.Clock
	b   *score.Budget
}

func newBudget(t testing.TB, nodes int) *bharness {
	clk := healthtest.NewClock(healthtest.Epoch)
	return &bharness{t: t, clk: clk, b: score.NewBudget(clk, members(nodes))}
}

func qual(n int) score.Trial { return score.Trial{Node: node(n), Question: score.Qualification} }

func pair(n, tgt int) score.Trial {
	return score.Trial{Node: node(n), Question: score.Pair, Target: target(tgt)}
}

func (h *bharness) earn(k score.BudgetKey, times int) {
	for range times {
		h.b.Earn(k)
	}
}

func (h *bharness) reserve(k score.BudgetKey, usable bool, tr score.Trial) score.Reservation {
	h.t.Helper()
	r, err := h.b.Reserve(k, usable, tr)
	if err != nil {
		h.t.Fatalf("Reserve: %v", err)
	}
	return r
}

func (h *bharness) refused(k score.BudgetKey, usable bool, tr score.Trial, want error) {
	h.t.Helper()
	if _, err := h.b.Reserve(k, usable, tr); !errors.Is(err, want) {
		h.t.Fatalf("Reserve: %v, want %v", err, want)
	}
}

// trial reserves, begins and settles one trial.
func (h *bharness) trial(k score.BudgetKey, usable bool, tr score.Trial, o score.TrialOutcome) {
	h.t.Helper()
	r := h.reserve(k, usable, tr)
	if err := h.b.Begin(r); err != nil {
		h.t.Fatalf("Begin: %v", err)
	}
	h.b.Settle(r, o)
}

func (h *bharness) ledger(k score.BudgetKey) score.Ledger {
	h.t.Helper()
	l, ok := h.b.Ledger(k)
	if !ok {
		h.t.Fatal("no ledger")
	}
	return l
}

func TestColdAllowance(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 4, 9: 4, 10: 5, 16: 5, 17: 6, 100: 11} {
		if got := score.ColdAllowance(n); got != want {
			t.Errorf("B(%d) = %d, want %d", n, got, want)
		}
	}
	// A scope freezes its group's n and B at creation; B is what it funds cold.
	for _, n := range []int{1, 2, 3, 4, 5, 9, 10, 17} {
		h := newBudget(t, n)
		want := score.ColdAllowance(n)
		for i := range want {
			h.reserve(kV4, true, pair(1, i))
		}
		h.refused(kV4, true, pair(1, want), score.ErrNoCredit)
		if l := h.ledger(kV4); l.Members != n || l.ColdAllowance != want || l.Reserved != int64(want) {
			t.Errorf("n=%d: ledger %+v", n, l)
		}
	}
}

func TestCurrencyQuietShare(t *testing.T) {
	h := newBudget(t, 1)
	h.trial(kV4, false, qual(1), score.TrialInconclusive) // spend B = 1
	h.earn(kV4, 15)
	if e := h.ledger(kV4).Earned; e != 15.0/16 {
		t.Fatalf("E after 15 originals = %v, want 15/16", e)
	}
	h.refused(kV4, false, qual(1), score.ErrNoCredit)
	h.earn(kV4, 1)
	h.reserve(kV4, false, qual(1))
	// Reads, time and a repeated scope in one plan mint nothing.
	h.clk.Advance(time.Hour)
	h.b.Ledger(kV4)
	h.b.Earn(kV4, kV4)
	if l := h.ledger(kV4); l.Earned != 17.0/16 || l.Counts.Originals != 17 {
		t.Fatalf("ledger %+v, want E 17/16 from 17 originals", l)
	}
}

// busy makes the group busy on TCP through the other family's scope, so
// kV4's own credit stays below its cap.
func (h *bharness) busy() { h.earn(kV6, 870) }

func (h *bharness) delta(k score.BudgetKey) float64 {
	before := h.ledger(k).Earned
	h.b.Earn(k)
	return h.ledger(k).Earned - before
}

// spendAll spends k's credit on inconclusive trials, which move no yield.
func (h *bharness) spendAll(k score.BudgetKey) {
	for i := 0; ; i++ {
		r, err := h.b.Reserve(k, false, pair(1, 1000+i))
		if err != nil {
			return
		}
		if i > 1000 {
			h.t.Fatal("credit never runs out")
		}
		if err := h.b.Begin(r); err != nil {
			h.t.Fatal(err)
		}
		h.b.Settle(r, score.TrialInconclusive)
	}
}

func TestCurrencyBusyShare(t *testing.T) {
	outcomes := func(h *bharness, os ...score.TrialOutcome) {
		for i, o := range os {
			h.trial(kV4, false, qual(i+1), o)
		}
	}
	ok, bad := score.TrialSucceeded, score.TrialFailed
	for _, c := range []struct {
		name   string
		busy   bool
		trials []score.TrialOutcome
		want   float64
	}{
		{"busy, three successes", true, []score.TrialOutcome{ok, ok, ok}, 1.0 / 8},
		{"busy, four of five", true, []score.TrialOutcome{ok, ok, ok, ok, bad}, 1.0 / 8},
		{"quiet, three successes", false, []score.TrialOutcome{ok, ok, ok}, 1.0 / 16},
		{"busy, two successes", true, []score.TrialOutcome{ok, ok}, 1.0 / 16},
		{"busy, two of three", true, []score.TrialOutcome{ok, ok, bad}, 1.0 / 16},
		{"busy, refusals are no outcomes", true, []score.TrialOutcome{ok, ok, score.TrialRefused}, 1.0 / 16},
	} {
		h := newBudget(t, 6)
		h.earn(kV4, 64)
		outcomes(h, c.trials...)
		if c.busy {
			h.busy()
		} else {
			h.earn(kV6, 800)
		}
		if d := h.delta(kV4); d != c.want {
			t.Errorf("%s: earned %v per original, want %v", c.name, d, c.want)
		}
	}

	// Busy is a steady two flows per second, not 1.9.
	for _, c := range []struct {
		gap  time.Duration
		want float64
	}{{500 * time.Millisecond, 1.0 / 8}, {time.Second * 10 / 19, 1.0 / 16}} {
		h := newBudget(t, 6)
		h.earn(kV4, 64)
		outcomes(h, ok, ok, ok)
		for range 20000 {
			h.clk.Advance(c.gap)
			h.b.Earn(kV6)
		}
		// The trial outcomes decayed over those minutes; refresh them.
		outcomes(h, ok, ok, ok)
		if d := h.delta(kV4); d != c.want {
			t.Errorf("one original every %v: earned %v, want %v", c.gap, d, c.want)
		}
	}

	// One original counted in both family scopes is one original of the
	// group's demand: 450 plans through both stay quiet.
	h := newBudget(t, 6)
	h.earn(kV4, 64)
	outcomes(h, ok, ok, ok)
	for range 450 {
		h.b.Earn(kV4, kV6)
	}
	h.spendAll(kV4)
	if d := h.delta(kV4); d != 1.0/16 {
		t.Errorf("nested plans double-counted demand: earned %v", d)
	}
}

func TestCreditCap(t *testing.T) {
	h := newBudget(t, 1)
	h.earn(kV4, 1000)
	if e := h.ledger(kV4).Earned; e != score.CreditCap {
		t.Fatalf("E = %v after 1000 originals, want the cap %d", e, score.CreditCap)
	}
	var rs []score.Reservation
	for i := range 1 + score.CreditCap { // B + 8
		rs = append(rs, h.reserve(kV4, false, pair(1, i)))
	}
	h.refused(kV4, false, pair(1, 99), score.ErrNoCredit)
	// Spending frees room under the cap: credit earned after spending counts.
	for _, r := range rs {
		if err := h.b.Begin(r); err != nil {
			t.Fatal(err)
		}
		h.b.Settle(r, score.TrialInconclusive)
	}
	h.earn(kV4, 1000)
	if l := h.ledger(kV4); l.Earned != 16 || l.Spent != 9 {
		t.Fatalf("ledger %+v: want E 16 (8 spent beyond B, 8 unspent), V 9", l)
	}
}

func TestPause(t *testing.T) {
	h := newBudget(t, 8) // B = 4
	h.earn(kV4, 16*8)
	h.trial(kV4, true, qual(1), score.TrialFailed)
	h.trial(kV4, true, qual(2), score.TrialFailed)
	// Two recent failures, no success: paused while the selection is usable.
	h.refused(kV4, true, qual(3), score.ErrPaused)
	// Not paused without a usable selection, nor for recovery.
	r := h.reserve(kV4, false, qual(3))
	h.b.Release(r)
	r = h.reserve(kV4, true, score.Trial{Node: node(4), Question: score.Recovery, Target: target(1)})
	h.b.Release(r)
	// The failures decay below two: one trial at a time.
	h.clk.Advance(5 * time.Minute)
	r = h.reserve(kV4, true, qual(3))
	h.refused(kV4, true, qual(4), score.ErrPaused)
	if err := h.b.Begin(r); err != nil {
		t.Fatal(err)
	}
	h.b.Settle(r, score.TrialSucceeded) // 1 of 2.4: above 20 %
	h.reserve(kV4, true, qual(4))
	h.reserve(kV4, true, qual(5))
}

func TestPauseBoundary(t *testing.T) {
	for _, c := range []struct {
		fails int
		want  error
	}{{4, nil}, {5, score.ErrPaused}} {
		h := newBudget(t, 8)
		h.earn(kV4, 16*8)
		h.trial(kV4, true, qual(1), score.TrialSucceeded)
		for i := range c.fails {
			h.trial(kV4, true, qual(2+i), score.TrialFailed)
		}
		h.clk.Advance(time.Second)
		tr := qual(8)
		if _, err := h.b.Reserve(kV4, true, tr); !errors.Is(err, c.want) {
			t.Errorf("1 success, %d failures: %v, want %v", c.fails, err, c.want)
		}
	}
}

func TestRefundOnlyUnbegun(t *testing.T) {
	h := newBudget(t, 2) // B = 2
	r1 := h.reserve(kV4, false, qual(1))
	r2 := h.reserve(kV4, false, qual(2))
	h.refused(kV4, false, pair(1, 1), score.ErrNoCredit)
	h.b.Release(r1) // unbegun: refunded
	h.b.Release(r1) // twice: nothing more
	r3 := h.reserve(kV4, false, pair(1, 1))
	if err := h.b.Begin(r1); !errors.Is(err, score.ErrReservationGone) {
		t.Fatalf("Begin of a released reservation: %v", err)
	}
	if err := h.b.Begin(r2); err != nil {
		t.Fatal(err)
	}
	h.b.Release(r2) // begun: no refund
	h.b.Settle(r2, score.TrialInconclusive)
	h.refused(kV4, false, pair(2, 1), score.ErrNoCredit)
	// Settling an unbegun reservation releases it.
	h.b.Settle(r3, score.TrialSucceeded)
	r4 := h.reserve(kV4, false, pair(2, 1))
	// An unbegun reservation expires and is refunded; a begun one is not.
	if err := h.b.Begin(r4); err != nil {
		t.Fatal(err)
	}
	h.earn(kV4, 16)
	r5 := h.reserve(kV4, false, pair(2, 2))
	h.clk.Advance(score.ReserveTTL)
	if err := h.b.Begin(r5); !errors.Is(err, score.ErrReservationGone) {
		t.Fatalf("Begin of an expired reservation: %v", err)
	}
	h.clk.Advance(score.TrialTTL)
	h.reserve(kV4, false, pair(2, 3))
	l := h.ledger(kV4)
	if l.Spent != 2 || l.Reserved != 1 || l.Counts.Refunded != 3 || l.Counts.Expired != 1 {
		t.Fatalf("ledger %+v", l)
	}
	h.refused(kV4, false, pair(2, 4), score.ErrNoCredit)
}

func TestOneUnansweredTrial(t *testing.T) {
	h := newBudget(t, 2)
	h.earn(kV4, 16*8)
	r := h.reserve(kV4, false, pair(1, 1))
	h.refused(kV4, false, pair(1, 1), score.ErrInFlight)
	// Another target or question of the member, or another member, is free.
	h.reserve(kV4, false, pair(1, 2))
	h.reserve(kV4, false, score.Trial{Node: node(1), Question: score.Availability, Target: target(1)})
	h.reserve(kV4, false, pair(2, 1))
	// Qualification counts across targets.
	h.reserve(kV4, false, score.Trial{Node: node(1), Question: score.Qualification, Target: target(1)})
	h.refused(kV4, false, score.Trial{Node: node(1), Question: score.Qualification, Target: target(2)}, score.ErrInFlight)
	// Begun, the trial is still unanswered; settled, it is answered.
	if err := h.b.Begin(r); err != nil {
		t.Fatal(err)
	}
	h.refused(kV4, false, pair(1, 1), score.ErrInFlight)
	h.b.Settle(r, score.TrialInconclusive)
	r = h.reserve(kV4, false, pair(1, 1))
	// A begun trial that never settles stops blocking at its expiry.
	if err := h.b.Begin(r); err != nil {
		t.Fatal(err)
	}
	h.clk.Advance(score.TrialTTL - time.Second)
	h.refused(kV4, false, pair(1, 1), score.ErrInFlight)
	h.clk.Advance(time.Second)
	h.reserve(kV4, false, pair(1, 1))
}

func TestBackoff(t *testing.T) {
	h := newBudget(t, 2)
	h.earn(kV4, 16*8)
	want := []time.Duration{5, 10, 20, 40, 80, 160, 320, 360, 360}
	for i, m := range want {
		h.earn(kV4, 16)
		h.trial(kV4, false, qual(1), score.TrialFailed)
		d := m * time.Minute
		h.clk.Advance(d - time.Second)
		h.refused(kV4, false, qual(1), score.ErrBackedOff)
		h.b.Release(h.reserve(kV4, false, qual(2))) // another member is not backed off
		h.clk.Advance(time.Second)
		r, err := h.b.Reserve(kV4, false, qual(1))
		if err != nil {
			t.Fatalf("failure %d: still refused after %v: %v", i+1, d, err)
		}
		h.b.Release(r)
	}
	// A success ends the streak: the next failure backs off 5 minutes.
	h.trial(kV4, false, qual(1), score.TrialSucceeded)
	h.trial(kV4, false, qual(1), score.TrialFailed)
	h.clk.Advance(5 * time.Minute)
	r := h.reserve(kV4, false, qual(1))
	h.b.Release(r)
	// A real business failure backs off too; recovery RX ends it.
	h.b.Failed(kV4, node(1))
	h.refused(kV4, false, qual(1), score.ErrBackedOff)
	h.b.Recovered(kV4, node(1), netx.Addr{})
	h.reserve(kV4, false, qual(1))
}

func TestWaitIsReadOnly(t *testing.T) {
	h := newBudget(t, 1)
	if err := h.b.Wait(kV4, false, qual(1)); err != nil {
		t.Fatalf("fresh scope: %v", err)
	}
	if _, ok := h.b.Ledger(kV4); ok {
		t.Fatal("Wait created a scope")
	}
	r := h.reserve(kV4, false, qual(1))
	if err := h.b.Wait(kV4, false, qual(1)); err != score.ErrInFlight {
		t.Fatalf("Wait: %v, want in flight", err)
	}
	if err := h.b.Wait(kV4, false, pair(1, 1)); err != score.ErrNoCredit {
		t.Fatalf("Wait: %v, want no credit", err)
	}
	// Past its TTL the reservation reads as refunded, but Wait does not
	// sweep it: the refund is counted by the next mutation.
	h.clk.Advance(score.ReserveTTL)
	if err := h.b.Wait(kV4, false, qual(1)); err != nil {
		t.Fatalf("Wait after expiry: %v", err)
	}
	if l := h.ledger(kV4); l.Counts.Refunded != 0 || l.Reserved != 0 {
		t.Fatalf("ledger %+v", l)
	}
	if err := h.b.Begin(r); err != score.ErrReservationGone {
		t.Fatalf("Begin: %v", err)
	}
	if l := h.ledger(kV4); l.Counts.Refunded != 1 {
		t.Fatalf("ledger %+v", l)
	}
}
