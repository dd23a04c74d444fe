package score_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

func TestEngineRankBeginSettle(t *testing.T) {
	h := newEng(t, 3)
	r := h.req(target(1))
	d := h.useful(r)
	if d.Index < 0 || d.Reason == score.NoReason || d.Attempt == nil {
		t.Fatalf("decision %+v", d)
	}
	if !r.Cands[d.Index].Winner {
		t.Error("winner not marked")
	}
	st := h.stats(netx.TCP)
	if reasonTotal(st) != 1 {
		t.Errorf("reasons %+v, want exactly one", st.Reasons)
	}
	if st.Pool.Capacity != 3 || st.Pool.Members != 3 {
		t.Errorf("pool %+v", st.Pool)
	}
	if st.Budget.Originals != 1 {
		t.Errorf("originals %d", st.Budget.Originals)
	}
	if c := h.e.Stats().Cache; c.ExactCells != 1 || c.AggregateCells != 2 {
		t.Errorf("cache %+v", c)
	}
}

func TestEnginePeekChangesNothing(t *testing.T) {
	h := newEng(t, 3)
	r := h.req(target(1))
	r.Peek = true
	for range 5 {
		d := h.e.Rank(h.now(), r)
		if d.Index < 0 || d.Attempt != nil || d.Reason != score.NoReason {
			t.Fatalf("peek %+v", d)
		}
	}
	st := h.stats(netx.TCP)
	if reasonTotal(st) != 0 || st.Pool.Members != 0 || st.Budget.Originals != 0 {
		t.Errorf("peek changed state: %+v", st)
	}
	if c := h.e.Stats().Cache; c.HistoryEntries != 0 || c.ExactCells != 0 {
		t.Errorf("peek changed caches: %+v", c)
	}
}

func TestEngineSingletonAndRetryNeutral(t *testing.T) {
	h := newEng(t, 1)
	h.useful(h.req(target(1)))
	if n := reasonTotal(h.stats(netx.TCP)); n != 0 {
		t.Errorf("singleton counted %d reasons", n)
	}
	h2 := newEng(t, 3)
	d := h2.useful(h2.req(target(1)))
	r := h2.req(target(1))
	r.Retry = true
	r.Exclude = r.Cands[d.Index].Node
	d2 := h2.e.Rank(h2.now(), r)
	if d2.Index < 0 || d2.Index == d.Index || d2.Reason != score.NoReason {
		t.Fatalf("retry %+v after %+v", d2, d)
	}
	st := h2.stats(netx.TCP)
	if reasonTotal(st) != 1 || st.Budget.Originals != 1 {
		t.Errorf("retry counted: reasons %d originals %d", reasonTotal(st), st.Budget.Originals)
	}
	d2.Attempt.Release(h2.now())
}

func TestEngineStalePlanRefunds(t *testing.T) {
	h := newEng(t, 3)
	d := h.e.Rank(h.now(), h.req(target(1)))
	h.e.Configure(h.now(), []score.GroupSpec{spec(grp, 3)}) // a reload resets the pool
	_, err := d.Attempt.Begin(h.now())
	var ce *score.CancelError
	if !errors.As(err, &ce) || !errors.Is(err, score.ErrStalePlan) {
		t.Fatalf("stale plan: %v", err)
	}
	if _, err := d.Attempt.Begin(h.now()); !errors.Is(err, score.ErrAttemptDone) {
		t.Errorf("second Begin: %v", err)
	}
}

func TestEngineStatsJSON(t *testing.T) {
	h := newEng(t, 3)
	h.useful(h.req(target(1)))
	b, err := json.Marshal(h.e.Stats())
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	for _, k := range []string{`"groups"`, `"network":"tcp"`, `"coldExplore"`, `"performanceWinner"`, `"ordinarySwitch"`, `"switchFlap"`,
		`"deadFiltered"`, `"failStreakExcluded"`, `"exploreBackedOff"`, `"budgetBlocked"`, `"inFlight"`, `"budget"`, `"credit"`,
		`"pool":{"capacity":3,"members":3}`, `"cache"`, `"exactCells"`, `"comparisonCells"`, `"comparisonBytes"`} {
		if !strings.Contains(s, k) {
			t.Errorf("stats JSON lacks %s: %s", k, s)
		}
	}
	if strings.Contains(s, "t1.example") || strings.Contains(s, node(1).String()) {
		t.Errorf("stats JSON holds an identity: %s", s)
	}
}

var _ = time.Second
