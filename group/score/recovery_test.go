package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

func TestRecoveryByFourDistinctReporters(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	var rs []*score.Reporter
	for range 4 {
		rs = append(rs, h.open(sc))
	}
	h.clk.Advance(time.Second)
	h.fail(sc, score.TargetPath)
	if v := h.view(sc); !v.Exact.Hard {
		t.Fatal("the failure opened no hard episode")
	}
	for i, r := range rs[:3] {
		h.clk.Advance(time.Second)
		r.Progress(h.now(), 0, 1)
		if v := h.view(sc); !v.Exact.Hard || v.Exact.Qualified {
			t.Fatalf("recovered after %d reporters: %+v", i+1, v.Exact)
		}
	}
	h.clk.Advance(time.Second)
	rs[3].Progress(h.now(), 0, 1)
	v := h.view(sc)
	if v.Exact.Hard || !v.Exact.Qualified || !v.Exact.Usable || !v.Exact.LeaseUntil.Equal(h.now().Add(score.Lease)) {
		t.Fatalf("four reporters did not recover the cell: %+v", v.Exact)
	}
	// Recovery erases no history and invents no terminal success.
	if v.Exact.Successes != 0 || v.Exact.Failures < 0.99 {
		t.Errorf("recovery changed the outcomes: %+v", v.Exact)
	}
}

// One reporter that keeps receiving counts once, however often it returns,
// and credits from before the failure do not come back with it.
func TestSingleReturningReporterRevivesNothing(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	var rs []*score.Reporter
	for range 4 {
		rs = append(rs, h.live(sc)) // a full cohort before the failure
	}
	if !h.view(sc).Exact.Usable {
		t.Fatal("four reporters are not usable")
	}
	h.clk.Advance(time.Second)
	h.fail(sc, score.TargetRefused)
	for range 10 {
		h.clk.Advance(2 * time.Second)
		rs[0].Progress(h.now(), 0, 1)
	}
	if v := h.view(sc); !v.Exact.Hard || v.Exact.Usable || v.Exact.Qualified {
		t.Fatalf("a single returning reporter revived the cell: %+v", v.Exact)
	}
	// The three others return as well: the new cohort is full.
	for _, r := range rs[1:] {
		r.Progress(h.now(), 0, 1)
	}
	if v := h.view(sc); v.Exact.Hard {
		t.Fatalf("four surviving reporters did not recover: %+v", v.Exact)
	}
}

func TestCohortResetByGap(t *testing.T) {
	for _, gap := range []time.Duration{score.CohortGap - time.Nanosecond, score.CohortGap} {
		h := newHarness(t, 1)
		sc := scope(target(1), 1)
		h.fail(sc, score.TargetPath)
		h.clk.Advance(time.Second)
		for range 3 {
			h.live(sc)
		}
		h.clk.Advance(gap)
		h.live(sc)
		recovered := !h.view(sc).Exact.Hard
		if want := gap < score.CohortGap; recovered != want {
			t.Errorf("gap %v: recovered %v, want %v", gap, recovered, want)
		}
	}
}

// Later eligible RX refreshes the cohort's time, so a cohort kept alive by
// its reporters does not lapse.
func TestCohortRefreshedByRX(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	h.fail(sc, score.TargetPath)
	h.clk.Advance(time.Second)
	r := h.live(sc)
	for range 3 {
		h.clk.Advance(40 * time.Second)
		r.Progress(h.now(), 0, 1)
	}
	for range 3 {
		h.live(sc)
	}
	if h.view(sc).Exact.Hard {
		t.Fatal("a cohort refreshed within 60 s lapsed")
	}
}

func TestCohortResetByFailureAndReload(t *testing.T) {
	for _, reset := range []string{"failure", "reload"} {
		h := newHarness(t, 1)
		sc := scope(target(1), 1)
		h.fail(sc, score.TargetPath)
		h.clk.Advance(time.Second)
		for range 3 {
			h.live(sc)
		}
		h.clk.Advance(time.Second)
		if reset == "failure" {
			h.fail(sc, score.TargetPath)
		} else {
			h.s.Reload(h.now(), members(1))
		}
		h.clk.Advance(time.Second)
		h.live(sc)
		if !h.view(sc).Exact.Hard {
			t.Errorf("%s: three old credits and one new recovered the cell", reset)
		}
	}
}

// Reload keeps an open episode, and four reporters after a reload with no
// failure grant no lease: reload alone creates no failure provenance.
func TestReloadCreatesNoProvenance(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	h.useful(sc)
	h.s.Reload(h.now(), members(1))
	h.clk.Advance(time.Second)
	for range 4 {
		h.live(sc)
	}
	if v := h.view(sc); v.Exact.Hard || v.Exact.Qualified || !v.Exact.Usable {
		t.Fatalf("after a reload four reporters: %+v (want usable, not qualified)", v.Exact)
	}
}

func TestNoAvailabilityFromProbesTXOrEarlyRX(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	h.fail(sc, score.ProxyAuth)
	for i := range 8 {
		h.clk.Advance(time.Second)
		h.s.RecordProbe(grp, sc.Network, sc.Node, h.now(), 20*time.Millisecond, true)
		r := h.begin(sc) // RX before setup and TX
		r.Progress(h.now(), 0, 10)
		r.Setup(h.now())
		r.Progress(h.now(), 10, 0)
		r.Cancel(h.now())
		r = h.begin(sc) // TX, then RX, both before setup
		r.Progress(h.now(), 10, 0)
		r.Progress(h.now(), 0, 10)
		r.Setup(h.now().Add(time.Millisecond))
		r.Cancel(h.now().Add(time.Millisecond))
		r = h.open(sc) // TX-only
		r.Progress(h.now(), 1<<20, 0)
		r.Settle(h.now())
		if i == 0 {
			r = h.begin(sc) // RX after setup but before TX
			r.Setup(h.now())
			r.Progress(h.now(), 0, 10)
			h.clk.Advance(time.Millisecond)
			r.Progress(h.now(), 10, 0)
			r.Cancel(h.now())
		}
	}
	v := h.view(sc)
	if !v.Global.Hard || !v.Exact.Hard || v.Global.Usable || v.Exact.Usable {
		t.Fatalf("probes, TX-only work or early RX recovered the node: %+v", v)
	}
	if !v.Probe.Valid {
		t.Error("a probe after the failure is not valid")
	}
}

// RX inside the one-second throttle is published later at its own event
// time — at settlement, or with the next publishable RX — not dropped and
// not at cleanup time.
func TestThrottledRXFlushedAtItsEventTime(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	h.fail(sc, score.TargetPath)
	h.clk.Advance(time.Second)
	rs := []*score.Reporter{h.live(sc), h.live(sc), h.live(sc)}
	r := h.open(sc)
	r.Progress(h.now(), 0, 1) // published: the fourth reporter
	if h.view(sc).Exact.Hard {
		t.Fatal("not recovered")
	}
	h.fail(sc, score.TargetPath)
	failAt := h.now()
	h.clk.Advance(500 * time.Millisecond)
	for _, x := range rs {
		x.Progress(h.now(), 0, 1) // inside each reporter's throttle: suppressed
	}
	r.Progress(h.now(), 0, 1)
	if !h.view(sc).Exact.Hard {
		t.Fatal("suppressed RX was published")
	}
	rxAt := h.now()
	h.clk.Advance(59 * time.Second)
	for _, x := range append(rs, r) {
		x.Cancel(h.now()) // flush at rxAt, after the failure
	}
	v := h.view(sc)
	if v.Exact.Hard || !v.Exact.LeaseUntil.Equal(rxAt.Add(score.Lease)) {
		t.Fatalf("flushed RX (after the failure at %v) did not recover at its event time %v: %+v", failAt, rxAt, v.Exact)
	}
}

// RX flushed at settlement long after the cohort moved on does not join it
// across its expired support.
func TestLateFlushDoesNotJoinAcrossExpiredSupport(t *testing.T) {
	h := newHarness(t, 1)
	sc := scope(target(1), 1)
	h.fail(sc, score.TargetPath)
	h.clk.Advance(time.Second)
	slow := h.live(sc)
	h.clk.Advance(500 * time.Millisecond)
	slow.Progress(h.now(), 0, 1) // suppressed, flushed at settlement
	h.clk.Advance(2 * score.CohortGap)
	for range 3 {
		h.live(sc)
	}
	slow.Settle(h.now())
	if !h.view(sc).Exact.Hard {
		t.Fatal("RX two minutes old joined the current cohort")
	}
}

func TestTargetlessRXEarnsNoAvailability(t *testing.T) {
	h := newHarness(t, 1)
	tl := scope(netx.Addr{}, 1)
	h.fail(tl, score.UnknownPreSetup)
	h.clk.Advance(time.Second)
	for range 8 {
		h.useful(tl)
	}
	if v := h.view(tl); !v.Global.Hard || v.Global.Usable || v.Global.Successes != 0 {
		t.Fatalf("targetless work earned availability: %+v", v.Global)
	}
}
