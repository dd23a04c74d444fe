package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// eng is an Engine over one group of n direct leaves on a fake clock.
type eng struct {
	t   testing.TB
	clk *healthtest.Clock
	e   *score.Engine
	n   int
}

func newEng(t testing.TB, n int) *eng {
	clk := healthtest.NewClock(healthtest.Epoch)
	e := score.NewEngine(clk)
	h := &eng{t: t, clk: clk, e: e, n: n}
	e.Configure(clk.Now(), []score.GroupSpec{spec(grp, n)})
	return h
}

func spec(g score.GroupID, n int) score.GroupSpec {
	s := score.GroupSpec{ID: g, Members: n}
	for i := range n {
		s.Leaves = append(s.Leaves, score.Leaf{Node: node(i + 1), Incarnation: 1})
	}
	return s
}

func (h *eng) now() time.Time { return h.clk.Now() }

// req is a targeted TCP request over every leaf, all eligible.
func (h *eng) req(tgt netx.Addr) *score.Request {
	r := &score.Request{Group: grp, Network: netx.TCP, Family: netx.V4, Target: tgt}
	for i := range h.n {
		r.Cands = append(r.Cands, score.Candidate{Node: node(i + 1), Eligible: true})
	}
	return r
}

// flow ranks r, begins the attempt and runs a useful flow on it; it
// returns the decision.
func (h *eng) useful(r *score.Request) score.Decision {
	h.t.Helper()
	d := h.e.Rank(h.now(), r)
	if d.Index < 0 {
		h.t.Fatalf("no selection")
	}
	f, err := d.Attempt.Begin(h.now())
	if err != nil {
		h.t.Fatalf("Begin: %v", err)
	}
	runUseful(f, h.now(), 0)
	return d
}

// runUseful runs a useful life on f with response latency lat.
func runUseful(f *score.Flow, at time.Time, lat time.Duration) {
	f.Setup(at)
	f.Progress(at, 100, 0)
	f.Response(at.Add(lat))
	f.Progress(at.Add(lat), 0, 100)
	f.Settle(at.Add(lat))
}

func (h *eng) stats(net netx.Network) score.GroupStats {
	for _, g := range h.e.Stats().Groups {
		if g.ID == grp && g.Network == net.String() {
			return g
		}
	}
	h.t.Fatalf("no stats for %v", net)
	return score.GroupStats{}
}

func reasonTotal(g score.GroupStats) int64 {
	var n int64
	for r := score.ColdExplore; r < score.NumReasons; r++ {
		n += g.Reasons.Get(r)
	}
	return n
}
