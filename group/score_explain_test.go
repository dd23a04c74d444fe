package group_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/group/score"
	"switchyard/netx"
	"switchyard/spec"
)

// settleFlows runs n TCP flows through tag to dst, each set up, answered,
// with a little progress, and settled.
func settleFlows(t *testing.T, e *env, c *clock, tag string, dst netx.Addr, n int) {
	t.Helper()
	for range n {
		_, _, q := flow(t, e, tag, dst)
		for i := range q.Attempts.Len() {
			r, err := q.Attempts.At(i).Begin(c.Now())
			if err != nil {
				continue
			}
			c.advance(5 * time.Millisecond)
			r.Setup(c.Now())
			c.advance(20 * time.Millisecond)
			r.Response(c.Now())
			r.Progress(c.Now(), 512, 4096)
			r.Settle(c.Now())
		}
		c.advance(time.Second)
	}
}

// A Score group's explanation names its members by tag (a sub-group by
// its own tag, never the leaf it reached or a node identity), for the
// aggregate read and for one exact target; other policies have none.
func TestAScoreExplanationNamesMembers(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "inner", "c"), auto("urltest", "inner", "b"), sel("top", "s")},
		leaves("a", "b", "c"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	settleFlows(t, e, c, "s", scoreDst, 6)

	x := e.m.Explain("s", netx.TCP, netx.V4)
	if x.Score == nil {
		t.Fatal("a Score group's explanation has no Score summary")
	}
	if e.m.Explain("top", netx.TCP, netx.V4).Score != nil || e.m.Explain("inner", netx.TCP, netx.V4).Score != nil {
		t.Fatal("a non-Score group has a Score summary")
	}
	tags := []string{"a", "inner", "c"}
	sx := *x.Score
	if sx.Exact || !slices.Contains(tags, sx.Selected) || sx.Selected != x.Winner {
		t.Fatalf("aggregate: selected %q (winner %q), exact %v", sx.Selected, x.Winner, sx.Exact)
	}
	if len(sx.Members) != 2 || sx.LastReason == "" {
		t.Fatalf("aggregate: members %+v, last reason %q: want the two challengers and the last reason", sx.Members, sx.LastReason)
	}
	for _, ms := range sx.Members {
		if !slices.Contains(tags, ms.Member) || ms.Member == sx.Selected || ms.Question == "" || ms.WaitReason == "" {
			t.Fatalf("aggregate member %+v", ms)
		}
	}
	if n := sx.NextBusinessFlow; n != nil && !slices.Contains(tags, n.Member) {
		t.Fatalf("next business flow %+v names no member", n)
	}

	ex, err := e.m.ExplainScore("s", netx.TCP, netx.V4, scoreDst)
	if err != nil || !ex.Exact || !slices.Contains(tags, ex.Selected) {
		t.Fatalf("exact: %+v, %v", ex, err)
	}
	b, _ := json.Marshal(ex)
	for _, leak := range []string{`"b"`, "192.0.2.9", "443"} {
		if strings.Contains(string(b), leak) {
			t.Fatalf("the exact read holds %s: %s", leak, b)
		}
	}
	if _, err := e.m.ExplainScore("top", netx.TCP, netx.V4, netx.Addr{}); !errors.Is(err, group.ErrNotScore) {
		t.Fatalf("a selector's Score summary: %v", err)
	}
	if _, err := e.m.ExplainScore("nope", netx.TCP, netx.V4, netx.Addr{}); !errors.Is(err, group.ErrUnknownGroup) {
		t.Fatalf("an unknown group's Score summary: %v", err)
	}
}

// Reading a Score summary, aggregate or exact, changes nothing: the same
// read twice gives the same summary, and the counters stay as they were.
func TestAScoreExplanationIsReadonly(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "b", "c")}, leaves("a", "b", "c"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	settleFlows(t, e, c, "s", scoreDst, 6)
	before := e.m.ScoreStats()
	for _, dst := range []netx.Addr{{}, scoreDst} {
		x1, err1 := e.m.ExplainScore("s", netx.TCP, netx.V4, dst)
		x2, err2 := e.m.ExplainScore("s", netx.TCP, netx.V4, dst)
		if err1 != nil || err2 != nil || !reflect.DeepEqual(x1, x2) {
			t.Fatalf("two reads differ: %+v %v / %+v %v", x1, err1, x2, err2)
		}
	}
	if after := e.m.ScoreStats(); !reflect.DeepEqual(before, after) {
		t.Fatalf("reads moved counters:\n%+v\n%+v", before, after)
	}
}

// A relation names its challenger by tag: the configured probes of two
// members give the selection's pair a probe-cohort response relation.
func TestAScoreRelationNamesItsChallenger(t *testing.T) {
	var eng *score.Engine
	c := newClock()
	e := build(t, []spec.Group{auto("score", "s", "a", "b")}, leaves("a", "b"), withScore(&eng, c))
	e.m.ConfigureScore(c.Now())
	for range 6 {
		eng.Probe(netx.TCP, node("a", 1), c.Now(), 40*time.Millisecond, true, 30*time.Second)
		eng.Probe(netx.TCP, node("b", 1), c.Now(), 41*time.Millisecond, true, 30*time.Second)
		c.advance(30 * time.Second)
	}
	settleFlows(t, e, c, "s", scoreDst, 2)
	x, err := e.m.ExplainScore("s", netx.TCP, netx.V4, netx.Addr{})
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Relations) != 1 {
		t.Fatalf("relations %+v (selected %q)", x.Relations, x.Selected)
	}
	r := x.Relations[0]
	want := "a"
	if x.Selected == "a" {
		want = "b"
	}
	if r.Member != want || r.Basis != score.BasisProbeCohort || r.Relation != score.RelEquivalent || r.ExpiresAt.IsZero() {
		t.Fatalf("relation %+v, want %s's equivalent probe-cohort relation", r, want)
	}
}
