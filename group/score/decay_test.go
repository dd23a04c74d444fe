package score_test

import (
	"math"
	"testing"
	"time"

	"switchyard/group/score"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestDecayHalvesAtHalfLife(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	for range 4 {
		h.useful(sc)
	}
	h.fail(sc, score.FlowIO)
	if v := h.view(sc); !near(v.Exact.Attempts, 5) || !near(v.Exact.Successes, 4) || !near(v.Exact.Failures, 1) {
		t.Fatalf("fresh: %+v", v.Exact)
	}
	h.clk.Advance(score.HalfLife)
	v := h.view(sc)
	for _, l := range []score.Layer{v.Global, v.Family, v.Exact} {
		if !near(l.Attempts, 2.5) || !near(l.Successes, 2) || !near(l.Failures, 0.5) {
			t.Errorf("at the half-life: %+v, want attempts 2.5, successes 2, failures 0.5", l)
		}
	}
	h.clk.Advance(score.HalfLife)
	if v := h.view(sc); !near(v.Exact.Successes, 1) {
		t.Errorf("at two half-lives: successes %v, want 1", v.Exact.Successes)
	}
}

// An event reported late (older than the cell's latest) decays from its own
// event time, not from its arrival.
func TestDecayFromEventTime(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	start := h.now()
	late := h.live(sc) // setup and RX at start
	h.clk.Advance(score.HalfLife)
	h.useful(sc) // a success at start+H
	late.Settle(start)
	if v := h.view(sc); !near(v.Exact.Successes, 1.5) {
		t.Errorf("successes %v, want 1 (now) + 0.5 (one half-life old)", v.Exact.Successes)
	}
	// Reads at a later time decay; reading never changes state.
	h.clk.Advance(10 * time.Minute)
	a := h.view(sc).Exact.Successes
	if b := h.view(sc).Exact.Successes; a != b || !near(a, 1.5*math.Exp2(-1.0/3)) {
		t.Errorf("read %v then %v", a, b)
	}
}
