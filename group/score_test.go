package group_test

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"switchyard/group"
	"switchyard/group/score"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
)

var scoreDst = netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.9:443"))

// withScore gives the Manager an engine of the test's (configured by the
// test, as the supervisor does at publication).
func withScore(e **score.Engine, c *clock) option {
	return func(o *group.Options) {
		*e = score.NewEngine(c)
		o.Score = *e
	}
}

// flow resolves tag for one TCP flow to dst and returns the leaf's tag,
// the chain and the query (its attempts, for the test to end).
func flow(t *testing.T, e *env, tag string, dst netx.Addr) (string, []string, *plane.Query) {
	t.Helper()
	q := &plane.Query{Network: netx.TCP, Dst: dst}
	l := e.m.Target(tag).Resolve(q)
	if l == nil {
		return "", nil, q
	}
	return l.ID().Tag, q.Path(), q
}

// reasons is the sum of a group's final reasons on TCP.
func reasons(m *group.Manager, tag string) (n int64) {
	for _, g := range m.ScoreStats().Groups {
		if g.Group == tag && g.Network == "tcp" {
			for r := score.Reason(1); r < score.NumReasons; r++ {
				n += g.Reasons.Get(r)
			}
		}
	}
	return n
}

func scoreStats(m *group.Manager, tag string) score.GroupStats {
	for _, g := range m.ScoreStats().Groups {
		if g.Group == tag && g.Network == "tcp" {
			return g.GroupStats
		}
	}
	return score.GroupStats{}
}

// A Score group's pick is the engine's rank: one leaf per flow, the
// plan's attempt on the query, exactly one final reason per rank; a dead
// member is shown to the engine as ineligible and never chosen.
func TestAScoreGroupRanksThroughTheEngine(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "b")}, leaves("a", "b"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	if e.m.Score() != eng {
		t.Fatal("the Manager does not rank with the engine it was given")
	}
	for i := range 3 {
		leaf, chain, q := flow(t, e, "s", scoreDst)
		if leaf != "a" && leaf != "b" || !equal(chain, []string{"s", leaf}) {
			t.Fatalf("flow %d: leaf %q chain %v", i, leaf, chain)
		}
		if q.Attempts.Len() != 1 {
			t.Fatalf("flow %d: %d attempts, want the group's one", i, q.Attempts.Len())
		}
		q.Attempts.Release(c.Now())
		if n := reasons(e.m, "s"); n != int64(i+1) {
			t.Fatalf("after %d ranks, %d reasons counted", i+1, n)
		}
	}
	e.h.kill("a")
	for range 3 {
		leaf, _, q := flow(t, e, "s", scoreDst)
		if leaf != "b" {
			t.Fatalf("a dead member was chosen: %q", leaf)
		}
		q.Attempts.Release(c.Now())
	}
	if st := scoreStats(e.m, "s"); st.DeadFiltered < 3 {
		t.Fatalf("deadFiltered %d, want the dead member counted at each rank", st.DeadFiltered)
	}
}

// Nested Score groups each attribute the leaf's outcome: a walk through
// two Score groups carries two attempts.
func TestNestedScoreGroupsEachAttribute(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "outer", "inner", "c"), auto("score", "inner", "a", "b")},
		leaves("a", "b", "c"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	e.h.kill("c")
	leaf, chain, q := flow(t, e, "outer", scoreDst)
	if leaf != "a" && leaf != "b" || !equal(chain, []string{"outer", "inner", leaf}) {
		t.Fatalf("leaf %q chain %v", leaf, chain)
	}
	if q.Attempts.Len() != 2 {
		t.Fatalf("%d attempts, want one per Score group traversed", q.Attempts.Len())
	}
	// Both begin and end as one flow's reports.
	for i := range q.Attempts.Len() {
		r, err := q.Attempts.At(i).Begin(c.Now())
		if err != nil {
			t.Fatalf("attempt %d: %v", i, err)
		}
		r.Setup(c.Now())
		r.Response(c.Now())
		r.Settle(c.Now())
	}
}

// Peeks (Explain, the Groups listing, the selection chain) rank readonly:
// no attempt, no reason, no original start, no serving pool.
func TestAScorePeekTakesNoAttemptOrCounter(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "b"), sel("top", "s")}, leaves("a", "b"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	for range 3 {
		x := e.m.Explain("s", netx.TCP, netx.V4)
		if x.Reason != group.ReasonScored || x.Winner == "" || len(x.Candidates) != 2 || !x.Candidates[0].Scored {
			t.Fatalf("explanation %+v", x)
		}
		e.m.Groups()
		e.m.SelectionChain("top", netx.TCP)
		e.m.Explain("top", netx.TCP, netx.V4)
	}
	// A plane query that only asks (the DNS service's "would this name
	// leave through a proxy") ranks readonly too.
	for range 3 {
		q := &plane.Query{Network: netx.TCP, Dst: scoreDst, Peek: true}
		if l := e.m.Target("s").Resolve(q); l == nil || q.Attempts.Len() != 0 {
			t.Fatalf("a peeking query: leaf %v, %d attempts", l, q.Attempts.Len())
		}
	}
	st := scoreStats(e.m, "s")
	if reasons(e.m, "s") != 0 || st.Budget.Originals != 0 || st.Pool.Members != 0 {
		t.Fatalf("a peek counted: %+v", st)
	}
	now := ""
	for _, in := range e.m.Groups() {
		if in.Tag == "s" {
			now = in.Now[netx.TCP]
		}
	}
	if now != "a" && now != "b" {
		t.Fatalf("the Groups listing's now is %q, want the aggregate winner", now)
	}
}

// A Score-owned setup failure gets one sequential retry: the walk again
// with the failed node excluded, on a different leaf, with its own
// attempt; a second failure gets none.
func TestAScoreRetryExcludesTheFailedNodeOnce(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "b", "c")}, leaves("a", "b", "c"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	for range 5 {
		q := &plane.Query{Network: netx.TCP, Dst: scoreDst}
		target := e.m.Target("s")
		first := target.Resolve(q)
		if first == nil {
			t.Fatal("no leaf")
		}
		q.Attempts.Release(c.Now())
		next := target.Retry(q, first)
		if len(next) != 1 || next[0] == first {
			t.Fatalf("retry %v after %s, want one different leaf", next, first.ID().Tag)
		}
		if !q.Retry || q.Exclude != e.leaves[first.ID().Tag].Node || q.Attempts.Len() != 1 {
			t.Fatalf("retry query: retry %v, exclude %x, %d attempts", q.Retry, q.Exclude, q.Attempts.Len())
		}
		if tail := q.Path(); tail[len(tail)-1] != next[0].ID().Tag {
			t.Fatalf("retry chain %v", tail)
		}
		q.Attempts.Release(c.Now())
		if again := target.Retry(q, next[0]); again != nil {
			t.Fatalf("a second retry: %v", again)
		}
	}
}

// The Score group with one eligible leaf left retries nowhere: the only
// other member is dead.
func TestAScoreRetryNeedsAnotherEligibleLeaf(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "b")}, leaves("a", "b"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	e.h.kill("b")
	q := &plane.Query{Network: netx.TCP, Dst: scoreDst}
	target := e.m.Target("s")
	first := target.Resolve(q)
	q.Attempts.Release(c.Now())
	if first == nil || first.ID().Tag != "a" {
		t.Fatalf("first %v", first)
	}
	if next := target.Retry(q, first); next != nil {
		t.Fatalf("retry %v with no other eligible leaf", next[0].ID().Tag)
	}
	if q.Attempts.Len() != 0 {
		t.Fatal("a refused retry kept attempts")
	}
}

// The engine is configured with each Score group's UUID, member count and
// every leaf it reaches at its incarnation.
func TestScoreGroupsNameEveryReachableLeaf(t *testing.T) {
	ls := leaves("a", "b", "c")
	l := ls["c"]
	l.Incarnation = 7
	ls["c"] = l
	e := build(t, []spec.Group{withFinal(auto("score", "s", "inner", "a"), "c"), auto("urltest", "inner", "b")}, ls)
	specs := e.m.ScoreGroups()
	if len(specs) != 1 || specs[0].Members != 2 {
		t.Fatalf("specs %+v", specs)
	}
	var got []string
	for _, lf := range specs[0].Leaves {
		for tag, x := range ls {
			if x.Node == lf.Node {
				got = append(got, tag)
				if tag == "c" && lf.Incarnation != 7 {
					t.Fatalf("c's incarnation %d", lf.Incarnation)
				}
			}
		}
	}
	slices.Sort(got)
	if !equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("leaves %v", got)
	}
	// Without an engine given, the Manager ranks with its own.
	if e.m.Score() == nil {
		t.Fatal("no engine")
	}
	if leaf := e.tcp("s"); leaf != "a" && leaf != "b" {
		t.Fatalf("leaf %q", leaf)
	}
}

// A Score group whose only leaf is dead still serves it for TCP (the last
// resort) inside its serving pool: the flow carries the group's attempt,
// and no reason is counted for it.
func TestAScoreGroupsLastResortEntersItsPool(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a")}, leaves("a"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	e.h.kill("a")
	leaf, _, q := flow(t, e, "s", scoreDst)
	if leaf != "a" || q.Attempts.Len() != 1 {
		t.Fatalf("leaf %q, %d attempts: want the dead only leaf with the group's attempt", leaf, q.Attempts.Len())
	}
	r, err := q.Attempts.At(0).Begin(c.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.Cancel(c.Now())
	if n := reasons(e.m, "s"); n != 0 {
		t.Fatalf("%d reasons counted for a last resort", n)
	}
	if _, _, q := flow(t, e, "s", scoreDst); q.Attempts.Len() != 1 {
		t.Fatal("the second last-resort flow carries no attempt")
	} else {
		q.Attempts.Release(c.Now())
	}
	// UDP keeps normal exclusion.
	if l := e.udp("s"); l != "" {
		t.Fatalf("UDP served the dead leaf %q", l)
	}
}

// A Selector sub-group is one candidate of its Score parent (its choice's
// leaf): the parent ranks it and keeps its attempt on the walk.
func TestAScoreParentAttributesThroughASelectorChild(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "outer", "pin", "c"), sel("pin", "a", "b")}, leaves("a", "b", "c"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	e.h.kill("c")
	leaf, chain, q := flow(t, e, "outer", scoreDst)
	if leaf != "a" || !equal(chain, []string{"outer", "pin", "a"}) || q.Attempts.Len() != 1 {
		t.Fatalf("leaf %q chain %v, %d attempts", leaf, chain, q.Attempts.Len())
	}
	q.Attempts.Release(c.Now())
}

// A Score group under another policy ranks for real only when the walk
// goes through it: a URLTest parent's quiet ranking of its members peeks
// (no reason counted), its chosen Score member then adds its attempt.
func TestAScoreGroupUnderAURLTestRanksOnceForReal(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("urltest", "auto", "smart"), auto("score", "smart", "a", "b")}, leaves("a", "b"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	for i := range 3 {
		leaf, chain, q := flow(t, e, "auto", scoreDst)
		if leaf == "" || !equal(chain, []string{"auto", "smart", leaf}) || q.Attempts.Len() != 1 {
			t.Fatalf("leaf %q chain %v, %d attempts", leaf, chain, q.Attempts.Len())
		}
		q.Attempts.Release(c.Now())
		if n := reasons(e.m, "smart"); n != int64(i+1) {
			t.Fatalf("after %d flows, %d reasons: the quiet ranking counted", i+1, n)
		}
	}
}

// A plan made before a reload is refused at begin with the engine's typed
// cancellation (the data path refuses the flow with it, never dialing).
func TestAPlanMadeBeforeAReloadIsRefusedAtBegin(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "b")}, leaves("a", "b"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	_, _, q := flow(t, e, "s", scoreDst)
	if q.Attempts.Len() != 1 {
		t.Fatalf("%d attempts", q.Attempts.Len())
	}
	e.m.ConfigureScore(c.Now()) // a reload resets the serving pools
	if _, err := q.Attempts.At(0).Begin(c.Now()); !errors.Is(err, score.ErrStalePlan) {
		t.Fatalf("begin after a reload: %v, want the stale plan's cancellation", err)
	}
}
