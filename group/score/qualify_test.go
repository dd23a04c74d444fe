package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
)

func TestQualifyAtFourCompletionsNotThree(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	for i := range 3 {
		h.useful(sc)
		if v := h.view(sc); v.Exact.Qualified {
			t.Fatalf("qualified after %d completions", i+1)
		}
		h.clk.Advance(time.Second)
	}
	h.useful(sc)
	v := h.view(sc)
	if !v.Exact.Qualified || !v.Family.Qualified || !v.Global.Qualified {
		t.Fatalf("not qualified after four completions: %+v", v)
	}
	if want := h.now().Add(score.Lease); !v.Exact.LeaseUntil.Equal(want) {
		t.Errorf("lease until %v, want %v", v.Exact.LeaseUntil, want)
	}
}

// A completion without eligible RX (TX-only work, RX before setup, a flow
// with no data) is no useful completion.
func TestQualifyNeedsUsefulCompletions(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	for range 10 {
		r := h.open(sc) // setup and TX, no RX
		r.Settle(h.now())
		r = h.begin(sc) // RX before setup and TX
		r.Response(h.now())
		r.Setup(h.now().Add(time.Millisecond))
		r.Settle(h.now().Add(time.Millisecond))
		r = h.begin(sc) // setup and RX, never TX
		r.Setup(h.now())
		r.Progress(h.now(), 0, 5000)
		r.Settle(h.now())
		h.clk.Advance(time.Second)
	}
	if v := h.view(sc); v.Exact.Qualified || v.Exact.Successes != 0 || v.Exact.Usable {
		t.Fatalf("non-useful work qualified or succeeded: %+v", v.Exact)
	}
}

func TestLeaseFromRXEventTime(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	for range 4 {
		h.useful(sc)
	}
	r := h.open(sc)
	h.clk.Advance(50 * time.Second)
	r.Progress(h.now(), 0, 1) // fresh RX: lease runs 60 s from now
	rxAt := h.now()
	h.clk.Advance(score.Lease - time.Nanosecond)
	if v := h.view(sc); !v.Exact.Qualified || !v.Exact.LeaseUntil.Equal(rxAt.Add(score.Lease)) {
		t.Fatalf("lease lapsed before 60 s after RX: %+v", v.Exact)
	}
	h.clk.Advance(time.Nanosecond)
	if v := h.view(sc); v.Exact.Qualified {
		t.Fatalf("still qualified 60 s after the RX: %+v", v.Exact)
	}
	// Earned qualification survives the lapse: fresh RX renews it,
	// without adding a completion.
	r.Progress(h.now(), 0, 1)
	if v := h.view(sc); !v.Exact.Qualified || v.Exact.Successes > 4 {
		t.Fatalf("fresh RX did not renew earned qualification: %+v", v.Exact)
	}
}

func TestBelowThresholdRXCreatesNoLease(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	for range 3 {
		h.useful(sc)
	}
	r := h.open(sc)
	for range 5 {
		h.clk.Advance(2 * time.Second)
		r.Progress(h.now(), 0, 1)
	}
	if v := h.view(sc); v.Exact.Qualified || !v.Exact.LeaseUntil.IsZero() {
		t.Fatalf("RX on a cold cell made a lease: %+v", v.Exact)
	}
}

func TestFailureAndReloadRevokeLease(t *testing.T) {
	for _, revoke := range []string{"failure", "reload"} {
		t.Run(revoke, func(t *testing.T) {
			h := newHarness(t, 1)
			sc := scope(target(1), 1)
			for range 4 {
				h.useful(sc)
			}
			r := h.open(sc)
			h.clk.Advance(time.Second)
			if revoke == "failure" {
				h.fail(sc, score.TargetPath)
			} else {
				h.s.Reload(h.now(), members(1))
			}
			if v := h.view(sc); v.Exact.Qualified {
				t.Fatalf("qualified after %s", revoke)
			}
			// RX after the fence does not recreate the lease: a
			// reload-only or failed cell must earn it again.
			h.clk.Advance(time.Second)
			r.Progress(h.now(), 0, 1)
			if v := h.view(sc); v.Exact.Qualified {
				t.Fatalf("RX recreated a revoked lease after %s", revoke)
			}
		})
	}
}

// After a reload, qualification is earned again by four fresh completions;
// completions from before the reload do not count toward it.
func TestReloadRequiresFreshCompletions(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	for range 3 {
		h.useful(sc)
	}
	h.clk.Advance(time.Second)
	h.s.Reload(h.now(), members(1))
	h.clk.Advance(time.Second)
	h.useful(sc)
	if h.view(sc).Exact.Qualified {
		t.Fatal("completions before the reload counted")
	}
	for range 3 {
		h.useful(sc)
	}
	if !h.view(sc).Exact.Qualified {
		t.Fatal("four fresh completions after the reload did not qualify")
	}
}

// A flow begun before the reload but completing after it with RX only before
// the reload does not count.
func TestCompletionNeedsRXAfterFence(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	var old []*score.Reporter
	for range 4 {
		old = append(old, h.live(sc))
	}
	h.clk.Advance(time.Second)
	h.s.Reload(h.now(), members(1))
	h.clk.Advance(time.Second)
	for _, r := range old {
		r.Settle(h.now())
	}
	if v := h.view(sc); v.Exact.Qualified || !near(v.Exact.Successes, 4) {
		t.Fatalf("completions with RX before the reload qualified (or were not counted): %+v", v.Exact)
	}
}

func TestOneOutcomePerFlow(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	r := h.live(sc)
	r.Settle(h.now())
	r.Settle(h.now())
	r.Fail(h.now(), score.Failure{Kind: score.ProxyAuth})
	r.Cancel(h.now())
	v := h.view(sc)
	if !near(v.Exact.Successes, 1) || v.Exact.Failures != 0 || v.Global.Hard {
		t.Fatalf("more than one outcome: %+v", v)
	}
	c := h.live(sc)
	c.Cancel(h.now())
	c.Settle(h.now())
	if v := h.view(sc); !near(v.Exact.Successes, 1) || !near(v.Exact.Attempts, 2) {
		t.Fatalf("a cancelled flow settled: %+v", v.Exact)
	}
}
