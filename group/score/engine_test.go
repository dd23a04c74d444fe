package score_test

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
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

// A flow through the Engine feeds the evidence its rank reads.
func TestEngineFlowFeedsRanking(t *testing.T) {
	h := newEng(t, 2)
	tgt := target(1)
	_, before := h.peek(tgt)
	for range 4 {
		f := beginOn(t, h, tgt, 1)
		runUseful(f, h.now(), 20*time.Millisecond)
	}
	_, after := h.peek(tgt)
	if after[1] <= before[1] || after[1] <= after[0] {
		t.Fatalf("utilities %v → %v: leaf 2's flows did not count", before, after)
	}
}

// trial returns a funded trial decision of a three-leaf group whose leaf
// 1 is trained.
func trial(t *testing.T) (*eng, score.Decision) { return trialIn(t, 3) }

// trialIn is trial in a group of n leaves.
func trialIn(t *testing.T, n int) (*eng, score.Decision) {
	h := newEng(t, n)
	h.served(1, target(1), 6, 10*time.Millisecond)
	d := h.e.Rank(h.now(), h.req(target(1)))
	if !d.Attempt.Trial() {
		t.Fatalf("no trial: %d %v", d.Index, d.Reason)
	}
	if st := h.stats(netx.TCP); st.Budget.Reserved != 1 {
		t.Fatalf("reserved %d", st.Budget.Reserved)
	}
	return h, d
}

func TestEngineTrialReleaseRefunds(t *testing.T) {
	h, d := trial(t)
	d.Attempt.Release(h.now())
	st := h.stats(netx.TCP).Budget
	if st.Reserved != 0 || st.Spent != 0 || st.Trials.Refunded != 1 {
		t.Fatalf("after Release: %+v", st)
	}
}

func TestEngineTrialStalePlanRefunds(t *testing.T) {
	h, d := trial(t)
	h.e.Configure(h.now(), []score.GroupSpec{spec(grp, 3)})
	if _, err := d.Attempt.Begin(h.now()); !errors.Is(err, score.ErrStalePlan) {
		t.Fatalf("Begin after reload: %v", err)
	}
	st := h.stats(netx.TCP).Budget
	if st.Reserved != 0 || st.Spent != 0 || st.Trials.Refunded != 1 {
		t.Fatalf("stale trial not refunded: %+v", st)
	}
}

func TestEngineTrialCosts(t *testing.T) {
	h, d := trial(t)
	at := h.now()
	f, err := d.Attempt.Begin(at)
	if err != nil {
		t.Fatal(err)
	}
	f.Setup(at.Add(30 * time.Millisecond))
	f.Progress(at.Add(30*time.Millisecond), 10, 0)
	f.Response(at.Add(60 * time.Millisecond))
	f.Settle(at.Add(100 * time.Millisecond))
	st := h.stats(netx.TCP).Budget
	if st.Spent != 1 || st.Trials.Begun != 1 || st.Trials.Succeeded != 1 {
		t.Fatalf("trial counters %+v", st)
	}
	if math.Abs(st.Elapsed-0.1) > 1e-9 || math.Abs(st.Setup-0.03) > 1e-9 {
		t.Fatalf("costs: elapsed %v setup %v", st.Elapsed, st.Setup)
	}
}

func TestEngineConfigureDropsGroup(t *testing.T) {
	h := newEng(t, 2)
	h.useful(h.req(target(1)))
	other := score.GroupID{0x77}
	h.e.Configure(h.now(), []score.GroupSpec{spec(other, 2)})
	for _, g := range h.e.Stats().Groups {
		if g.ID == grp {
			t.Fatal("a dropped group still has stats")
		}
	}
	if c := h.e.Stats().Cache; c.ExactCells != 0 || c.AggregateCells != 0 {
		t.Fatalf("a dropped group's cells stayed: %+v", c)
	}
	// Its ranks are unscored: the first eligible candidate, reporting nothing.
	d := h.e.Rank(h.now(), h.req(target(1)))
	if d.Index != 0 || d.Reason != score.NoReason || d.Attempt == nil {
		t.Fatalf("unscored decision %+v", d)
	}
	f, err := d.Attempt.Begin(h.now())
	if err != nil {
		t.Fatal(err)
	}
	runUseful(f, h.now(), 0)
	if c := h.e.Stats().Cache; c.ExactCells != 0 {
		t.Fatal("an unscored flow reported")
	}
}

// An authoritative health exclusion replaces the member at the next
// Apply.
func TestEngineNodeDownReplaces(t *testing.T) {
	h := newEng(t, 9)
	r := h.req(netx.Addr{})
	d1 := h.rankReq(r)
	if d := h.rankReq(h.req(netx.Addr{})); d.Index != d1.Index {
		t.Fatalf("unstable without an exclusion: %d then %d", d1.Index, d.Index)
	}
	h.e.NodeDown(node(d1.Index+1), h.now())
	if d := h.rankReq(h.req(netx.Addr{})); d.Index == d1.Index || d.Index < 0 {
		t.Fatalf("the excluded node %d still serves (%d)", d1.Index, d.Index)
	}
}

// Ranks, flows, probes, stats and reloads from many goroutines.
func TestEngineConcurrent(t *testing.T) {
	h := newEng(t, 6)
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Go(func() {
			for i := range 300 {
				at := h.now()
				r := h.req(target(i % 13))
				d := h.e.Rank(at, r)
				if d.Attempt == nil {
					continue
				}
				f, err := d.Attempt.Begin(at)
				if err != nil {
					continue
				}
				var inner sync.WaitGroup
				inner.Go(func() { f.Progress(at, 100, 0) })
				inner.Go(func() { f.Response(at) })
				inner.Wait()
				if (i+w)%5 == 0 {
					f.Fail(at, score.Failure{Kind: score.SharedCarrier, Episode: h.e.NewEpisode()})
				} else {
					f.Settle(at)
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 200 {
			h.e.Probe(netx.TCP, node(i%6+1), h.now(), time.Millisecond, true, time.Second)
			_ = h.e.Stats()
			if i%50 == 0 {
				h.e.Configure(h.now(), []score.GroupSpec{spec(grp, 6)})
			}
			h.clk.Advance(10 * time.Millisecond)
		}
	})
	wg.Wait()
}

// Genuine scoped RX on a failed node ends its trial backoff.
func TestEngineRecoveryRXEndsBackoff(t *testing.T) {
	for _, recover := range []bool{false, true} {
		h, d := trialIn(t, 2)
		f, _ := d.Attempt.Begin(h.now())
		f.Fail(h.now(), score.Failure{Kind: score.UnknownPreSetup}) // node-scoped: hard, and backed off
		failed := d.Index + 1
		h.clk.Advance(time.Second)
		if recover {
			g := h.e.FlowOn(scope(target(1), failed), h.now())
			g.Setup(h.now())
			g.Progress(h.now(), 100, 0)
			g.Response(h.now())
			g.Cancel(h.now())
		}
		before := h.stats(netx.TCP).ExploreBackedOff
		for range 2 {
			if d := h.e.Rank(h.now(), h.req(target(1))); d.Attempt != nil {
				d.Attempt.Release(h.now())
			}
		}
		backedOff := h.stats(netx.TCP).ExploreBackedOff > before
		if backedOff == recover {
			t.Errorf("recovery RX %v: backed off %v", recover, backedOff)
		}
	}
}

// Three node-wide failures in a row of a member's flows replace it at the
// next Apply; two do not.
func TestEngineNodeFailuresReplace(t *testing.T) {
	for _, fails := range []int{2, 3} {
		h := newEng(t, 9)
		d := h.rankReq(h.req(netx.Addr{}))
		x := d.Index
		for range fails {
			r := h.req(netx.Addr{})
			for i := range r.Cands {
				r.Cands[i].Eligible = i == x
			}
			d := h.e.Rank(h.now(), r)
			f, err := d.Attempt.Begin(h.now())
			if d.Index != x || err != nil {
				t.Fatalf("flow on %d: %d %v", x, d.Index, err)
			}
			f.Fail(h.now(), score.Failure{Kind: score.SharedCarrier})
			h.clk.Advance(time.Second)
		}
		h.rankReq(h.req(netx.Addr{})) // the Apply
		if in := h.e.PoolHas(grp, netx.TCP, node(x+1)); in != (fails < score.ReplaceAfter) {
			t.Errorf("after %d node-wide failures: member %v", fails, in)
		}
	}
}

// Among never-selected untrained challengers the configured-probe order
// breaks the tie: the faster-probing leaf gets the first trial.
func TestEngineWalkProbeHint(t *testing.T) {
	for _, fast := range []int{2, 3} {
		h := newEng(t, 3)
		h.served(1, target(1), 6, 10*time.Millisecond)
		h.clk.Advance(time.Second)
		slow := 5 - fast
		h.e.Probe(netx.TCP, node(fast), h.now(), 10*time.Millisecond, true, 30*time.Second)
		h.e.Probe(netx.TCP, node(slow), h.now(), 90*time.Millisecond, true, 30*time.Second)
		d := h.e.Rank(h.now(), h.req(target(1)))
		if !d.Attempt.Trial() || d.Index+1 != fast {
			t.Errorf("first trial on leaf %d (trial %v), want the faster-probing %d", d.Index+1, d.Attempt.Trial(), fast)
		}
	}
}

// Comparison cells are admitted for serving members (and before the pool
// exists), not for other nodes.
func TestEngineComparisonAdmission(t *testing.T) {
	h := newEng(t, 9)
	cells := func() int { return h.e.Stats().Cache.ComparisonCells }
	h.served(9, target(1), 1, 10*time.Millisecond) // initial collection
	if cells() != 1 {
		t.Fatalf("initial collection: %d cells", cells())
	}
	d := h.rankReq(h.req(netx.Addr{})) // the pool exists now
	var out int
	for i := 1; i <= 9; i++ {
		if !h.e.PoolHas(grp, netx.TCP, node(i)) && i != d.Index+1 {
			out = i
			break
		}
	}
	h.served(out, target(2), 1, 10*time.Millisecond)
	if cells() != 1 {
		t.Fatalf("a non-member's comparison cell was admitted: %d", cells())
	}
	h.served(d.Index+1, target(2), 1, 10*time.Millisecond)
	if cells() != 2 {
		t.Fatalf("a member's comparison cell was refused: %d", cells())
	}
}

// A preflight ranks through the prospective membership and commits
// nothing; a peek reads the committed one.
func TestEnginePreflight(t *testing.T) {
	h := newEng(t, 9)
	d := h.rankReq(h.req(netx.Addr{}))
	x := node(d.Index + 1)
	h.e.NodeDown(x, h.now())
	peek := h.req(netx.Addr{})
	peek.Peek = true
	if p := h.e.Rank(h.now(), peek); p.Index != d.Index {
		t.Fatalf("peek %d, want the committed winner %d", p.Index, d.Index)
	}
	pre := h.req(netx.Addr{})
	pre.Preflight = true
	p := h.e.Rank(h.now(), pre)
	if p.Index < 0 || p.Index == d.Index || p.Attempt != nil || p.Reason != score.NoReason {
		t.Fatalf("preflight %+v, want another member, readonly", p)
	}
	if !h.e.PoolHas(grp, netx.TCP, x) {
		t.Fatal("the preflight committed the replacement")
	}
	if st := h.stats(netx.TCP); reasonTotal(st) != 1 || st.Budget.Originals != 1 {
		t.Fatalf("the preflight counted: %+v", st)
	}
}
