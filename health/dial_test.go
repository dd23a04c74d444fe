package health_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
)

var errDial = errors.New("dial refused")

// Two consecutive real dial failures: a synthetic placeholder and one
// strike; a lone failure leaves nothing.
func TestDialFailureStrikes(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	h.e.ReportDial(id(1), v4, 0, false, errDial)
	if h.e.Strikes(id(1)) != 0 || len(h.state(1).Of(health.TCP, v4).History) != 0 {
		t.Fatal("a lone dial failure left selection state")
	}
	h.e.ReportDial(id(1), v4, 30*time.Millisecond, false, nil) // rescued: the streak ends
	h.e.ReportDial(id(1), v4, 0, false, errDial)
	if h.e.Strikes(id(1)) != 0 {
		t.Fatal("failures separated by a success made a strike")
	}
	h.e.ReportDial(id(1), v4, 0, false, errDial)
	s := h.state(1)
	if s.Strikes != 1 || s.FailureStrikes != 1 {
		t.Fatalf("two consecutive failures: strikes %d", s.Strikes)
	}
	hist := s.Of(health.TCP, v4).History
	if len(hist) != 1 || !hist[0].Synthetic || hist[0].Delay != health.SyntheticDelay {
		t.Fatalf("history %+v, want one synthetic 10s placeholder", hist)
	}
	if _, ok := h.e.Latency(id(1), health.TCP, v4); ok {
		t.Error("the placeholder created a latency")
	}
	if got, ok := h.e.LastReal(id(1)); ok {
		t.Errorf("the placeholder is the last real sample %+v", got)
	}
}

// Only a real dial success resets the streak: probe successes do not, so a
// probe-alive but dial-dead node keeps accumulating strikes.
func TestProbeAliveDialDeadAccumulates(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	for i := range 6 {
		h.e.ReportDial(id(1), v4, 0, false, errDial)
		h.probe(1) // succeeds
		if want := (i + 1) / 2; h.e.Strikes(id(1)) != want {
			t.Fatalf("after %d failures with probe successes between: %d strikes, want %d", i+1, h.e.Strikes(id(1)), want)
		}
	}
	if !h.alive(1, health.TCP, v4) {
		t.Error("6 dial failures killed TCP (its threshold is 10)")
	}
}

// Strikes clear only after max(strikes, 2) consecutive real successes.
func TestStrikesClear(t *testing.T) {
	for _, strikes := range []int{1, 2, 3, 5} {
		h := newHarness(t, nil)
		h.register(1)
		for range 2 * strikes {
			h.e.ReportDial(id(1), v4, 0, false, errDial)
		}
		if h.e.Strikes(id(1)) != strikes {
			t.Fatalf("strikes %d, want %d", h.e.Strikes(id(1)), strikes)
		}
		need := max(strikes, 2)
		// A failure in the middle restarts the count.
		h.e.ReportDial(id(1), v4, time.Millisecond, true, nil)
		h.e.ReportDial(id(1), v4, 0, false, errDial)
		for i := 1; i <= need; i++ {
			h.e.ReportDial(id(1), v4, 40*time.Millisecond, i%2 == 0, nil)
			if got, cleared := h.e.Strikes(id(1)), i == need; (got == 0) != cleared {
				t.Fatalf("%d strikes, %d successes: %d left", strikes, i, got)
			}
		}
	}
}

// Dial failures are real-traffic TCP failures: 10 in a row kill TCP of
// the family; cancelled dials are ignored.
func TestDialFailuresKillTCP(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	h.pastGrace()
	for range 20 {
		h.e.ReportDial(id(1), v6, 0, false, context.Canceled)
	}
	if !h.alive(1, health.TCP, v6) || h.e.Strikes(id(1)) != 0 {
		t.Fatal("cancelled dials counted")
	}
	for i := 1; i <= health.TrafficFailuresTCP; i++ {
		h.e.ReportDial(id(1), v6, 0, false, errDial)
		if got, want := h.alive(1, health.TCP, v6), i < health.TrafficFailuresTCP; got != want {
			t.Fatalf("after %d dial failures alive=%v", i, got)
		}
	}
	if !h.alive(1, health.TCP, v4) {
		t.Error("V6 dial failures killed V4")
	}
	if got := h.deathsSeen(); len(got) != 1 {
		t.Errorf("OnDeath %v", got)
	}
}

// The dial EMA: after 3 warm-up dials, three consecutive fresh dials
// slower than max(min(2×EMA, EMA+500ms), 250ms) add one strike and fire
// an emergency probe; pooled dials are excluded; the probe average is not
// touched; probe successes clear the strike (a false positive heals).
func TestDialEMASlowStrike(t *testing.T) {
	h := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = nil })
	h.register(1)
	h.p(1).SetTCP(healthtest.OK(90 * time.Millisecond))
	h.start()
	base, _ := h.e.Latency(id(1), health.TCP, v4)
	tcp0, _ := h.p(1).Calls()
	for range 3 {
		h.e.ReportDial(id(1), v4, 100*time.Millisecond, false, nil) // warm-up
	}
	if s := h.state(1); !s.DialEMAWarm || s.DialEMA != 100*time.Millisecond {
		t.Fatalf("EMA %v warm %v", s.DialEMA, s.DialEMAWarm)
	}
	// Threshold: max(min(200ms, 600ms), 250ms) = 250ms.
	h.e.ReportDial(id(1), v4, 240*time.Millisecond, false, nil) // not slow (floor)
	h.e.ReportDial(id(1), v4, 400*time.Millisecond, false, nil)
	h.e.ReportDial(id(1), v4, 5*time.Second, true, nil) // pooled: ignored
	h.e.ReportDial(id(1), v4, 400*time.Millisecond, false, nil)
	if h.e.Strikes(id(1)) != 0 {
		t.Fatal("two slow dials made a strike")
	}
	h.e.ReportDial(id(1), v4, 400*time.Millisecond, false, nil)
	if s := h.state(1); s.Strikes != 1 || s.SlowStrikes != 1 {
		t.Fatalf("three slow dials: strikes %+v", s.Strikes)
	}
	h.wantLog("node n1: 3 consecutive dials slower than")
	if got, _ := h.e.Latency(id(1), health.TCP, v4); got != base {
		t.Errorf("dial latencies moved the probe average %v -> %v", base, got)
	}
	health.Settle(h.e) // the emergency probe, without advancing the clock
	if tcp, _ := h.p(1).Calls(); tcp != tcp0+1 {
		t.Fatalf("emergency probes %d, want 1", tcp-tcp0)
	}
	if h.e.Strikes(id(1)) != 1 {
		t.Fatal("one probe success cleared the strike")
	}
	h.step(30*time.Second, time.Second) // the next cycle: the second success
	if h.e.Strikes(id(1)) != 0 {
		t.Fatalf("consecutive probe successes did not clear the slow strike (%d)", h.e.Strikes(id(1)))
	}
}

// The 250 ms floor keeps a fast node's jitter from tripping the detector,
// and the 500 ms slack bounds a slow node's threshold.
func TestDialEMAThreshold(t *testing.T) {
	for _, tc := range []struct {
		ema, dial time.Duration
		slow      bool
	}{
		{60 * time.Millisecond, 120 * time.Millisecond, false},
		{60 * time.Millisecond, 260 * time.Millisecond, true},
		{200 * time.Millisecond, 390 * time.Millisecond, false},
		{200 * time.Millisecond, 600 * time.Millisecond, true},
		{time.Second, 1400 * time.Millisecond, false},
		{time.Second, 2 * time.Second, true},
	} {
		h := newHarness(t, nil)
		h.register(1)
		for range 3 {
			h.e.ReportDial(id(1), v4, tc.ema, false, nil)
		}
		// Three dials at tc.dial: the EMA (and the threshold) moves by
		// 1/8 of the gap each time; these dials are on the same side of
		// all three thresholds.
		for range 3 {
			h.e.ReportDial(id(1), v4, tc.dial, false, nil)
		}
		if got := h.e.Strikes(id(1)) == 1; got != tc.slow {
			t.Errorf("EMA %v, dials %v: slow=%v, want %v", tc.ema, tc.dial, got, tc.slow)
		}
	}
}
