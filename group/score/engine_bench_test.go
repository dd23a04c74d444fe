package score_test

import (
	"fmt"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// BenchmarkRank50 is one flow's selection in a 50-member group with warm
// evidence: every member has probes, aggregate and exact-target evidence
// and performance metrics; the pool is initialized.
func BenchmarkRank50(b *testing.B) {
	h := newEng(b, 50)
	tgt := target(1)
	for i := range 50 {
		h.e.Probe(netx.TCP, node(i+1), h.now(), time.Duration(20+i)*time.Millisecond, true, 30*time.Second)
	}
	for range 400 {
		h.useful(h.req(tgt))
		h.clk.Advance(100 * time.Millisecond)
	}
	r := h.req(tgt)
	at := h.now()
	b.ReportAllocs()
	for b.Loop() {
		d := h.e.Rank(at, r)
		if d.Attempt != nil {
			d.Attempt.Release(at)
		}
	}
}

// BenchmarkRank50Peek is the readonly selection (the Clash view's now).
func BenchmarkRank50Peek(b *testing.B) {
	h := newEng(b, 50)
	r := h.req(target(1))
	h.e.Rank(h.now(), r).Attempt.Release(h.now())
	r.Peek = true
	b.ReportAllocs()
	for b.Loop() {
		h.e.Rank(h.now(), r)
	}
}

// BenchmarkFlowReport is one flow's reporting through the Engine: the
// Attempt's Begin, setup, progress, response and settlement. Ranks are
// made outside the timer, 256 at a time.
func BenchmarkFlowReport(b *testing.B) {
	h := newEng(b, 3)
	r := h.req(target(1))
	at := h.now()
	var batch [256]score.Decision
	n := len(batch)
	b.ReportAllocs()
	for b.Loop() {
		if n == len(batch) {
			b.StopTimer()
			for i := range batch {
				at = at.Add(time.Millisecond)
				batch[i] = h.e.Rank(at, r)
			}
			n = 0
			b.StartTimer()
		}
		d := batch[n]
		n++
		f, err := d.Attempt.Begin(at)
		if err != nil {
			b.Fatal(err)
		}
		runUseful(f, at, time.Millisecond)
	}
}

// BenchmarkEngineAtBounds reports the Engine's heap with 100 nodes and
// 10,000 distinct targets: every table at its bound.
func BenchmarkEngineAtBounds(b *testing.B) {
	var bytes uint64
	for b.Loop() {
		bytes = heapOf(func() any { return fillEngine(b, 100, 10000) })
	}
	b.ReportMetric(float64(bytes), "heap-B")
}

// fillEngine runs one useful flow to each of targets distinct targets
// through the Engine, over nodes nodes in groups of ten.
func fillEngine(tb testing.TB, nodes, targets int) *score.Engine {
	clk := healthtest.NewClock(healthtest.Epoch)
	e := score.NewEngine(clk)
	var specs []score.GroupSpec
	for g := range nodes / 10 {
		s := score.GroupSpec{ID: score.GroupID{0x60, byte(g)}, Members: 10}
		for i := range 10 {
			s.Leaves = append(s.Leaves, score.Leaf{Node: node(g*10 + i + 1), Incarnation: 1})
		}
		specs = append(specs, s)
	}
	e.Configure(clk.Now(), specs)
	r := &score.Request{Network: netx.TCP, Family: netx.V4}
	for i := range targets {
		g := specs[i%len(specs)]
		r.Group = g.ID
		r.Target = netx.DomainAddr(fmt.Sprintf("s%05d.example", i), 443)
		r.Cands = r.Cands[:0]
		for _, l := range g.Leaves {
			r.Cands = append(r.Cands, score.Candidate{Node: l.Node, Eligible: true})
		}
		at := clk.Now()
		d := e.Rank(at, r)
		if f, err := d.Attempt.Begin(at); err == nil {
			runUseful(f, at, 5*time.Millisecond)
		}
		clk.Advance(time.Millisecond)
	}
	return e
}

// beginOn ranks tgt with only leaf i+1 eligible and begins the attempt.
func beginOn(tb testing.TB, h *eng, tgt netx.Addr, i int) *score.Flow {
	tb.Helper()
	r := h.req(tgt)
	for j := range r.Cands {
		r.Cands[j].Eligible = j == i
	}
	d := h.e.Rank(h.now(), r)
	if d.Index != i {
		tb.Fatalf("rank chose %d, want %d", d.Index, i)
	}
	f, err := d.Attempt.Begin(h.now())
	if err != nil {
		tb.Fatalf("Begin: %v", err)
	}
	return f
}
