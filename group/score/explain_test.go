package score_test

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// explain is the readonly explanation of tgt (the zero Addr: the V4
// aggregate) over every leaf.
func (h *eng) explain(tgt netx.Addr) score.Explanation {
	h.t.Helper()
	return h.explainFam(tgt, netx.V4)
}

func (h *eng) explainFam(tgt netx.Addr, fam netx.Family) score.Explanation {
	h.t.Helper()
	r := h.req(tgt)
	ex, ok := h.e.Explain(h.now(), score.ExplainQuery{Group: grp, Network: netx.TCP, Family: fam, Target: tgt, Cands: r.Cands})
	if !ok {
		h.t.Fatal("Explain refused a configured group")
	}
	return ex
}

func relationOf(ex score.Explanation, member int) (score.Relation, bool) {
	for _, r := range ex.Relations {
		if r.Member == member {
			return r, true
		}
	}
	return score.Relation{}, false
}

func memberOf(ex score.Explanation, member int) (score.MemberState, bool) {
	for _, m := range ex.Members {
		if m.Member == member {
			return m, true
		}
	}
	return score.MemberState{}, false
}

// incumbentAt makes leaf 1 the trained ordinary winner of tgt in an
// n-leaf group with six completions of response latency lat.
func incumbentAt(t *testing.T, n int, tgt netx.Addr, lat time.Duration) *eng {
	t.Helper()
	h := newEng(t, n)
	h.served(1, tgt, 6, lat)
	d := h.e.Rank(h.now(), h.only(tgt, 1))
	if d.Index != 0 {
		t.Fatalf("first choice %d, want leaf 1", d.Index)
	}
	d.Attempt.Release(h.now())
	return h
}

// The band: inclusive, symmetric, relative to the lower response, with
// roundoff allowed only at the boundary; zero and sub-millisecond
// responses included.
func TestEquivalentBand(t *testing.T) {
	cases := []struct {
		a, b float64
		want bool
	}{
		{100, 110, true},       // exactly 10 %
		{110, 100, true},       // symmetric
		{100, 110.0001, false}, // just over
		{100, 111, false},      // inside a band taken from the higher value (11.1), outside this one
		{90.9, 100, false},     // 10 % of 100 but 10.01 % of 90.9
		{0.3, 0.33, true},      // exactly 10 % in decimal; 0.33−0.3 > 0.1×0.3 by roundoff
		{0.5, 0.55, true},      // sub-millisecond, the same
		{0.5, 0.5501, false},   // sub-millisecond, just over
		{0, 0, true},           // two zero responses
		{0, 1e-9, false},       // zero against anything positive
		{1e-9, 1.1e-9, true},
	}
	for _, c := range cases {
		if got := score.Equivalent(c.a, c.b); got != c.want {
			t.Errorf("Equivalent(%v, %v) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// Relations through the Engine at the band's edges: the exact pair's
// actual response values, never the promotion's margin — a challenger
// 9.1 % faster by the incumbent's gain (no promotion) is outside the
// band taken from the lower value, so it is faster while the incumbent
// holds.
func TestExplainRelationBandEdges(t *testing.T) {
	tgt := target(1)
	cases := []struct {
		name     string
		sel, ch  time.Duration
		relation string
		faster   string
	}{
		{"exactly 10 %", 100 * time.Millisecond, 110 * time.Millisecond, score.RelEquivalent, ""},
		{"just over", 100 * time.Millisecond, 110*time.Millisecond + time.Microsecond, score.RelFaster, "selection"},
		{"challenger faster, held", 100 * time.Millisecond, 90900 * time.Microsecond, score.RelFaster, "challenger"},
		{"sub-millisecond 10 %", 500 * time.Microsecond, 550 * time.Microsecond, score.RelEquivalent, ""},
		{"sub-millisecond over", 500 * time.Microsecond, 551 * time.Microsecond, score.RelFaster, "selection"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := incumbentAt(t, 2, tgt, c.sel)
			h.served(2, tgt, 6, c.ch)
			ex := h.explain(tgt)
			if ex.Selected != 0 {
				t.Fatalf("selected %d, want the incumbent", ex.Selected)
			}
			rel, ok := relationOf(ex, 1)
			if !ok {
				t.Fatalf("no relation: %+v", ex)
			}
			if rel.Relation != c.relation || rel.Faster != c.faster || rel.Basis != score.BasisTargetResponse {
				t.Fatalf("relation %+v, want %s %s on the target's response", rel, c.relation, c.faster)
			}
			wantSel, wantCh := float64(c.sel)/1e6, float64(c.ch)/1e6
			if d := rel.SelectionMs - wantSel; d > 1e-9 || d < -1e-9 || rel.ChallengerMs-wantCh > 1e-9 || rel.ChallengerMs-wantCh < -1e-9 {
				t.Fatalf("values %v / %v, want %v / %v", rel.SelectionMs, rel.ChallengerMs, wantSel, wantCh)
			}
		})
	}
}

// A relation expires with its response metric: at the expiry of the
// oldest shared block whose loss leaves a side short of four reporters.
func TestExplainRelationExpiresWithMetric(t *testing.T) {
	tgt := target(1)
	// Four reporters a side in one block: the block's start plus 60 s.
	h := incumbentAt(t, 2, tgt, 100*time.Millisecond)
	h.served(2, tgt, 4, 100*time.Millisecond)
	start := score.BlockStart(h.now())
	rel, ok := relationOf(h.explain(tgt), 1)
	if want := start.Add(score.BlockExpiry); !ok || !rel.ExpiresAt.Equal(want) {
		t.Fatalf("relation %+v (%v), want expiry %v", rel, ok, want)
	}
	h.clk.Advance(rel.ExpiresAt.Add(-time.Nanosecond).Sub(h.now()))
	if _, ok := relationOf(h.explain(tgt), 1); !ok {
		t.Fatal("relation gone before its expiry")
	}
	h.clk.Advance(rel.ExpiresAt.Sub(h.now()))
	if r, ok := relationOf(h.explain(tgt), 1); ok {
		t.Fatalf("relation %+v past its metric's expiry", r)
	}

	// Four more a side in a later block: the second block alone keeps
	// the metric known, so the relation lives until it expires.
	h = incumbentAt(t, 2, tgt, 100*time.Millisecond)
	h.served(2, tgt, 4, 100*time.Millisecond)
	h.clk.Advance(score.BlockWidth)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(2, tgt, 4, 100*time.Millisecond)
	second := score.BlockStart(h.now())
	if rel, ok := relationOf(h.explain(tgt), 1); !ok || !rel.ExpiresAt.Equal(second.Add(score.BlockExpiry)) {
		t.Fatalf("relation %+v, want expiry %v", rel, second.Add(score.BlockExpiry))
	}

	// Two reporters a side in each of two blocks: the first block's
	// expiry leaves two, so the relation ends with it.
	h = newEng(t, 2)
	h.served(1, tgt, 2, 100*time.Millisecond)
	h.served(2, tgt, 2, 100*time.Millisecond)
	first := score.BlockStart(h.now())
	h.clk.Advance(score.BlockWidth)
	h.served(1, tgt, 2, 100*time.Millisecond)
	h.served(2, tgt, 2, 100*time.Millisecond)
	ex := h.explain(tgt)
	rel, ok = relationOf(ex, 1-ex.Selected)
	if !ok || !rel.ExpiresAt.Equal(first.Add(score.BlockExpiry)) {
		t.Fatalf("relation %+v (%v), want expiry %v", rel, ok, first.Add(score.BlockExpiry))
	}
}

// Pairs need no joint alignment: each challenger is judged on its own
// shared blocks with the selection, and challengers that never shared a
// block with each other create no question against each other.
func TestExplainNoJointAlignment(t *testing.T) {
	tgt := target(1)
	h := incumbentAt(t, 3, tgt, 100*time.Millisecond)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(2, tgt, 6, 100*time.Millisecond) // block A: leaves 1 and 2
	a := score.BlockStart(h.now())
	h.clk.Advance(score.BlockWidth)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(3, tgt, 6, 90*time.Millisecond) // block B: leaves 1 and 3, not promoted
	b := score.BlockStart(h.now())
	if _, _, known := h.e.PairBasis(scope(tgt, 2), scope(tgt, 2), scope(tgt, 3)); known[0] {
		t.Fatal("leaves 2 and 3 share a block")
	}
	ex := h.explain(tgt)
	r2, ok2 := relationOf(ex, 1)
	r3, ok3 := relationOf(ex, 2)
	if ex.Selected != 0 || !ok2 || !ok3 {
		t.Fatalf("explanation %+v", ex)
	}
	if r2.Relation != score.RelEquivalent || !r2.ExpiresAt.Equal(a.Add(score.BlockExpiry)) {
		t.Fatalf("leaf 2 relation %+v", r2)
	}
	if r3.Relation != score.RelFaster || r3.Faster != "challenger" || !r3.ExpiresAt.Equal(b.Add(score.BlockExpiry)) {
		t.Fatalf("leaf 3 relation %+v", r3)
	}
	for _, m := range []int{1, 2} {
		if ms, _ := memberOf(ex, m); ms.Question != "none" {
			t.Fatalf("member %d has question %q: challengers' histories made demand against each other", m, ms.Question)
		}
	}
}

// An exact view labels only the exact target's own pair targetResponse;
// common-target and probe evidence keep their own basis, in an exact view
// and in an aggregate one.
func TestExplainBasisLabels(t *testing.T) {
	tgt, other := target(1), target(2)
	// Only a common target holds a pair: the exact view says so.
	h := incumbentAt(t, 2, tgt, 100*time.Millisecond)
	h.served(1, other, 4, 100*time.Millisecond)
	h.served(2, other, 4, 100*time.Millisecond)
	rel, ok := relationOf(h.explain(tgt), 1)
	if !ok || rel.Basis != score.BasisCommonTargets {
		t.Fatalf("exact view over common evidence: %+v (%v)", rel, ok)
	}
	// The aggregate view of exact-target evidence is common targets too.
	ag := h.explain(netx.Addr{})
	if ag.Exact {
		t.Fatal("the aggregate read claims to be exact")
	}
	for _, r := range ag.Relations {
		if r.Basis == score.BasisTargetResponse {
			t.Fatalf("aggregate relation labelled targetResponse: %+v", r)
		}
	}
	// Probes only: the configured-probe cohort.
	h = incumbentAt(t, 2, other, 100*time.Millisecond)
	for range 4 {
		for n := 1; n <= 2; n++ {
			h.e.Probe(netx.TCP, node(n), h.now(), time.Duration(10*n)*time.Millisecond, true, 30*time.Second)
		}
		h.clk.Advance(time.Second)
	}
	ex := h.explain(tgt)
	if rel, ok := relationOf(ex, 1-ex.Selected); !ok || rel.Basis != score.BasisProbeCohort {
		t.Fatalf("exact view over probe evidence: %+v (%v) in %+v", rel, ok, ex)
	}
	// The exact pair itself is targetResponse.
	h = incumbentAt(t, 2, tgt, 100*time.Millisecond)
	h.served(2, tgt, 4, 100*time.Millisecond)
	if rel, ok := relationOf(h.explain(tgt), 1); !ok || rel.Basis != score.BasisTargetResponse {
		t.Fatalf("exact pair: %+v (%v)", rel, ok)
	}
}

// Question and wait come from the first member of the dispatch order;
// the wait adds only the ledger's refusal, in the ledger's precedence:
// in flight before backoff before the budget; a member the walk would
// not dispatch waits for comparable traffic whatever the ledger says.
func TestExplainQuestionAndWaitPrecedence(t *testing.T) {
	tgt := target(1)
	h := incumbentAt(t, 2, tgt, 100*time.Millisecond)
	want := func(step, q, wait string) score.Explanation {
		t.Helper()
		ex := h.explain(tgt)
		m, ok := memberOf(ex, 1)
		if ex.Question != q || ex.WaitReason != wait || !ok || m.Question != q || m.WaitReason != wait {
			t.Fatalf("%s: question %q wait %q (member %+v), want %q %q", step, ex.Question, ex.WaitReason, m, q, wait)
		}
		return ex
	}
	if ex := want("fresh challenger", "qualification", score.WaitNone); ex.NextBusinessFlow == nil || ex.NextBusinessFlow.Member != 1 {
		t.Fatalf("next business flow %+v, want member 1", ex.NextBusinessFlow)
	}
	// B = 2 for two members. A reserved trial is in flight.
	d := h.e.Rank(h.now(), h.req(tgt))
	if !d.Attempt.Trial() || d.Index != 1 {
		t.Fatalf("rank %d trial %v, want a trial of leaf 2", d.Index, d.Attempt.Trial())
	}
	if ex := want("reserved", "qualification", score.WaitInFlight); ex.NextBusinessFlow != nil {
		t.Fatalf("next business flow %+v while the only member is in flight", ex.NextBusinessFlow)
	}
	f, err := d.Attempt.Begin(h.now())
	if err != nil {
		t.Fatal(err)
	}
	f.Cancel(h.now()) // V = 1
	want("answered", "qualification", score.WaitNone)
	d = h.e.Rank(h.now(), h.req(tgt)) // R = 1: V + R = B, and in flight
	if !d.Attempt.Trial() {
		t.Fatal("no second trial")
	}
	want("in flight at the budget's end", "qualification", score.WaitInFlight)
	f, _ = d.Attempt.Begin(h.now())
	f.Cancel(h.now()) // V = 2 = B
	want("exhausted", "qualification", score.WaitBudget)
	// A real node-scoped failure backs leaf 2 off: recovery, backoff
	// before the budget.
	h.e.FlowOn(scope(tgt, 2), h.now()).Fail(h.now(), score.Failure{Kind: score.ProxyProtocol})
	want("backed off", "recovery", score.WaitBackoff)

	// Comparable traffic: a trained challenger with a pair question and
	// as many completions as the selection is not dispatched.
	h = incumbentAt(t, 2, tgt, 100*time.Millisecond)
	h.clk.Advance(score.BlockWidth)
	h.served(2, tgt, 10, 50*time.Millisecond)
	if ex := want("challenger ahead", "pair", score.WaitComparableTraffic); ex.NextBusinessFlow != nil {
		t.Fatalf("next business flow %+v for an undispatchable member", ex.NextBusinessFlow)
	}
	h.clk.Advance(score.BlockWidth)
	h.served(1, tgt, 10, 100*time.Millisecond)
	want("selection ahead again", "pair", score.WaitNone)
}

// The first member of the dispatch order gives the question and wait;
// the next business flow is the member the walk would admit, behind an
// in-flight refusal.
func TestExplainFirstMemberAndNextFlow(t *testing.T) {
	tgt := target(1)
	h := incumbentAt(t, 3, tgt, 100*time.Millisecond)
	ex := h.explain(tgt)
	if len(ex.Members) != 2 || ex.NextBusinessFlow == nil {
		t.Fatalf("explanation %+v", ex)
	}
	first := ex.Members[0].Member
	d := h.e.Rank(h.now(), h.req(tgt))
	if !d.Attempt.Trial() || d.Index != first {
		t.Fatalf("rank trial %v on %d, want the first member %d", d.Attempt.Trial(), d.Index, first)
	}
	ex = h.explain(tgt)
	if ex.Members[0].Member != first || ex.WaitReason != score.WaitInFlight || ex.Question != "qualification" {
		t.Fatalf("after the reservation: %+v", ex)
	}
	if ex.NextBusinessFlow == nil || ex.NextBusinessFlow.Member == first {
		t.Fatalf("next business flow %+v, want the member behind the in-flight one", ex.NextBusinessFlow)
	}
	next := ex.NextBusinessFlow.Member
	if d := h.e.Rank(h.now(), h.req(tgt)); !d.Attempt.Trial() || d.Index != next {
		t.Fatalf("rank trial %v on %d, want %d", d.Attempt.Trial(), d.Index, next)
	}
}

// nextBusinessFlow is future demand, not a reservation: reading it
// reserves and mints nothing, and it counts the next original's own
// earned 1/q — with the ledger's current wait still budget.
func TestExplainNextBusinessFlowIsNoReservation(t *testing.T) {
	tgt := target(1)
	h := incumbentAt(t, 2, tgt, 100*time.Millisecond)
	for range 2 { // spend B = 2
		d := h.e.Rank(h.now(), h.req(tgt))
		if !d.Attempt.Trial() {
			t.Fatal("no trial within B")
		}
		f, _ := d.Attempt.Begin(h.now())
		f.Cancel(h.now())
	}
	before := h.e.State()
	ex := h.explain(tgt)
	if ex.WaitReason != score.WaitBudget || ex.NextBusinessFlow != nil {
		t.Fatalf("exhausted: %+v", ex)
	}
	// Originals earn 1/16 each until the next one's earn completes a
	// credit: the wait is still budget, the next flow validates.
	ranks := 0
	for ; ranks < 32; ranks++ {
		ex = h.explain(tgt)
		if ex.NextBusinessFlow != nil {
			break
		}
		d := h.e.Rank(h.now(), h.req(tgt))
		if d.Attempt.Trial() {
			t.Fatal("a trial the explanation did not announce")
		}
		d.Attempt.Release(h.now())
	}
	if ex.NextBusinessFlow == nil || ex.NextBusinessFlow.Member != 1 || ex.WaitReason != score.WaitBudget {
		t.Fatalf("after %d originals: %+v", ranks, ex)
	}
	st := h.stats(netx.TCP)
	if st.Budget.Reserved != 0 || st.Budget.Credit != 0 {
		t.Fatalf("the announcement reserved: %+v", st.Budget)
	}
	if before == h.e.State() {
		t.Fatal("state did not move over the originals")
	}
	if d := h.e.Rank(h.now(), h.req(tgt)); !d.Attempt.Trial() || d.Index != 1 {
		t.Fatalf("the announced flow: %d trial %v", d.Index, d.Attempt.Trial())
	}
}

// Reads change nothing: the same read twice, aggregate and exact, of
// both families (a V6 scope never retained is not created), leaves every
// counter, clock, ledger, trial, LRU order, pool and history as it was.
func TestExplainReadonly(t *testing.T) {
	tgt := target(1)
	h := incumbentAt(t, 3, tgt, 100*time.Millisecond)
	h.served(2, tgt, 6, 80*time.Millisecond)
	h.served(3, target(2), 2, 80*time.Millisecond)
	h.e.FlowOn(scope(target(3), 3), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
	d := h.e.Rank(h.now(), h.req(tgt)) // a reservation outstanding
	_ = d
	h.clk.Advance(10 * time.Second)
	before := h.e.State()
	var first []byte
	for i := range 2 {
		var all []score.Explanation
		for _, x := range []netx.Addr{tgt, target(2), target(3), target(9), {}} {
			all = append(all, h.explain(x), h.explainFam(x, netx.V6))
		}
		b, err := json.Marshal(all)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		} else if string(b) != string(first) {
			t.Fatalf("the second read differs:\n%s\n%s", first, b)
		}
	}
	if after := h.e.State(); after != before {
		t.Fatalf("a read moved state:\n%s\n---\n%s", before, after)
	}
	// A read of a group never ranked creates nothing either.
	h2 := newEng(t, 3)
	before = h2.e.State()
	h2.explain(tgt)
	h2.explain(netx.Addr{})
	if after := h2.e.State(); after != before {
		t.Fatalf("a read of a fresh engine moved state:\n%s\n---\n%s", before, after)
	}
}

// A rank sequence with and without interleaved reads gives identical
// decisions and counters.
func TestExplainBetweenRanksChangesNoDecision(t *testing.T) {
	run := func(reads bool) (string, string) {
		h := newEng(t, 5)
		rng := rand.New(rand.NewPCG(7, 9))
		var log strings.Builder
		for step := range 400 {
			tgt := target(rng.IntN(4))
			if rng.IntN(5) == 0 {
				tgt = netx.Addr{}
			}
			r := h.req(tgt)
			for i := range r.Cands {
				r.Cands[i].Eligible = rng.IntN(8) != 0
			}
			if reads {
				h.explain(tgt)
				h.explain(netx.Addr{})
				h.explainFam(tgt, netx.V6)
			}
			d := h.e.Rank(h.now(), r)
			trial := d.Attempt != nil && d.Attempt.Trial()
			log.WriteString(string(rune('a'+d.Index+1)) + d.Reason.String())
			if trial {
				log.WriteString("*")
			}
			if d.Attempt != nil {
				if f, err := d.Attempt.Begin(h.now()); err == nil {
					switch rng.IntN(6) {
					case 0:
						f.Fail(h.now(), score.Failure{Kind: score.TargetPath})
					case 1:
						f.Cancel(h.now())
					default:
						runUseful(f, h.now(), time.Duration(20+10*d.Index+rng.IntN(5))*time.Millisecond)
					}
				}
			}
			if reads {
				h.explain(tgt)
			}
			h.clk.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
			_ = step
		}
		st, _ := json.Marshal(h.e.Stats())
		return log.String(), string(st)
	}
	l1, s1 := run(false)
	l2, s2 := run(true)
	if l1 != l2 {
		t.Fatalf("decisions differ with reads:\n%s\n%s", l1, l2)
	}
	if s1 != s2 {
		t.Fatalf("stats differ with reads:\n%s\n%s", s1, s2)
	}
}

// The explanation names the last reason counter that moved and marshals
// without identities.
func TestExplainLastReasonAndNoIdentity(t *testing.T) {
	tgt := target(1)
	h := newEng(t, 2)
	if ex := h.explain(tgt); ex.LastReason != "" {
		t.Fatalf("last reason %q before any rank", ex.LastReason)
	}
	d := h.e.Rank(h.now(), h.req(tgt))
	d.Attempt.Release(h.now())
	ex := h.explain(tgt)
	if ex.LastReason != d.Reason.String() || ex.LastReason == "" {
		t.Fatalf("last reason %q, want %q", ex.LastReason, d.Reason)
	}
	b, _ := json.Marshal(ex)
	for _, leak := range []string{"t1.example", "beef", "\"node\"", "target\""} {
		if strings.Contains(strings.ToLower(string(b)), leak) {
			t.Fatalf("explanation leaks %q: %s", leak, b)
		}
	}
}

// Dispatch order: among trained members with a pair question, the one
// with more reporters already sharing live blocks with the selection
// goes first — in the readonly order and in the rank's walk.
func TestPairProgressOrdersDispatch(t *testing.T) {
	tgt := target(1)
	h := incumbentAt(t, 3, tgt, 100*time.Millisecond) // leaf 1 in block A
	h.served(3, tgt, 2, 100*time.Millisecond)         // leaf 3: two reporters shared with leaf 1
	h.clk.Advance(score.BlockWidth)
	h.served(2, tgt, 4, 100*time.Millisecond) // leaf 2: nothing shared
	h.served(3, tgt, 2, 100*time.Millisecond)
	ex := h.explain(tgt)
	if len(ex.Members) != 2 || ex.Members[0].Member != 2 || ex.Members[0].Question != "pair" || ex.Members[1].Question != "pair" {
		t.Fatalf("dispatch order %+v, want leaf 3 (two shared reporters) before leaf 2", ex.Members)
	}
	if ex.NextBusinessFlow == nil || ex.NextBusinessFlow.Member != 2 {
		t.Fatalf("next business flow %+v", ex.NextBusinessFlow)
	}
	if d := h.e.Rank(h.now(), h.req(tgt)); !d.Attempt.Trial() || d.Index != 2 {
		t.Fatalf("rank %d trial %v, want a pair trial of leaf 3", d.Index, d.Attempt.Trial())
	}
}
