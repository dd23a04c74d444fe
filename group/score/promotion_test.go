package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// served runs k useful flows of leaf n to tgt now, each its own reporter,
// with response latency lat.
func (h *eng) served(n int, tgt netx.Addr, k int, lat time.Duration) {
	for range k {
		runUseful(h.e.FlowOn(scope(tgt, n), h.now()), h.now(), lat)
	}
}

// bulk runs k flows of leaf n to tgt moving up and down bytes in one
// goodput window of two seconds, with response latency lat.
func (h *eng) bulk(n int, tgt netx.Addr, k int, lat time.Duration, up, down int64) {
	for range k {
		f := h.e.FlowOn(scope(tgt, n), h.now())
		at := h.now()
		f.Setup(at)
		f.Progress(at, 100, 0)
		f.Response(at.Add(lat))
		f.Progress(at.Add(lat), 0, 100)
		f.Progress(at.Add(lat+2*time.Second), up, down)
		f.Settle(at.Add(lat + 2*time.Second))
	}
}

// incumbent makes leaf 1 the trained ordinary winner of tgt in a
// two-leaf group and returns the harness.
func incumbent(t *testing.T, tgt netx.Addr) *eng {
	h := newEng(t, 2)
	h.served(1, tgt, 6, 100*time.Millisecond)
	r := h.req(tgt)
	r.Cands[1].Eligible = false // no trial: leaf 1 is the ordinary first choice
	d := h.e.Rank(h.now(), r)
	if d.Index != 0 {
		t.Fatalf("first choice %d, want leaf 1", d.Index)
	}
	d.Attempt.Release(h.now())
	return h
}

// rank returns the ordinary decision for tgt: funded trials the walk
// dispatches first are begun and cancelled (spent), until the budget
// dispatches none.
func (h *eng) rank(tgt netx.Addr) score.Decision {
	h.t.Helper()
	for range 16 {
		d := h.e.Rank(h.now(), h.req(tgt))
		if d.Attempt == nil {
			return d
		}
		if !d.Attempt.Trial() {
			d.Attempt.Release(h.now())
			return d
		}
		f, err := d.Attempt.Begin(h.now())
		if err != nil {
			h.t.Fatalf("trial Begin: %v", err)
		}
		f.Cancel(h.now())
	}
	h.t.Fatal("the walk never stops dispatching")
	return score.Decision{}
}

func TestPromotionExactTarget(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(2, tgt, 6, 50*time.Millisecond)
	if basis, g, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2)); basis != 1 || !known[0] || g[0] < 0.45 {
		t.Fatalf("pair basis %d gains %v known %v", basis, g, known)
	}
	if d := h.rank(tgt); d.Index != 1 || d.Reason != score.PerformanceWinner {
		t.Fatalf("decision %d %v, want leaf 2 by performanceWinner", d.Index, d.Reason)
	}
}

// A gain inside the 10 % equivalence band is no gain: the incumbent holds.
func TestPromotionWithinBandHolds(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.served(1, tgt, 4, 100*time.Millisecond)
	h.served(2, tgt, 6, 95*time.Millisecond)
	if d := h.rank(tgt); d.Index != 0 || d.Reason != score.IncumbentHeld {
		t.Fatalf("decision %d %v, want leaf 1 held", d.Index, d.Reason)
	}
}

// Evidence in different blocks is no pair: the faster challenger waits.
func TestPromotionNeedsSharedBlocks(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.clk.Advance(score.BlockWidth)
	h.served(2, tgt, 6, 50*time.Millisecond)
	if d := h.rank(tgt); d.Index != 0 || d.Reason != score.InsufficientEvidenceHeld {
		t.Fatalf("decision %d %v, want leaf 1 held for insufficient evidence", d.Index, d.Reason)
	}
}

// Three reporters on a side are not four.
func TestPromotionNeedsFourReporters(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.served(2, tgt, 4, 50*time.Millisecond) // trained, in the shared block
	if d := h.rank(tgt); d.Index != 1 {
		t.Fatalf("with four reporters: %d %v", d.Index, d.Reason)
	}
	h2 := incumbent(t, tgt)
	h2.clk.Advance(score.BlockWidth) // a block of its own trains the challenger
	h2.served(2, tgt, 4, 50*time.Millisecond)
	h2.clk.Advance(score.BlockWidth)
	h2.served(1, tgt, 4, 100*time.Millisecond)
	h2.served(2, tgt, 3, 50*time.Millisecond)
	if _, _, known := h2.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2)); known[0] {
		t.Fatal("three reporters in the shared block made a known pair")
	}
}

// Blocks expire at their start plus 60 s.
func TestPromotionBlocksExpire(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.served(2, tgt, 6, 50*time.Millisecond)
	if _, _, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2)); !known[0] {
		t.Fatal("no pair")
	}
	h.clk.Advance(score.BlockExpiry)
	if _, _, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2)); known[0] {
		t.Fatal("the pair outlived its blocks")
	}
}

func TestPromotionCommonTargets(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	for i := 2; i <= 5; i++ {
		h.served(1, target(i), 4, 100*time.Millisecond)
		h.served(2, target(i), 4, 50*time.Millisecond)
	}
	if basis, _, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2)); basis != 2 || !known[0] {
		t.Fatalf("basis %d known %v, want common targets", basis, known)
	}
	if d := h.rank(tgt); d.Index != 1 || d.Reason != score.PerformanceWinner {
		t.Fatalf("decision %d %v", d.Index, d.Reason)
	}
}

// At most eight common targets, in canonical order, weighted equally.
func TestPromotionCommonTargetsCapped(t *testing.T) {
	h := newEng(t, 2)
	// Targets a0..a7 (canonically first) favour leaf 2; z0..z3 favour leaf 1 hugely.
	for i := range 8 {
		a := netx.DomainAddr("a"+string(rune('0'+i))+".example", 443)
		h.served(1, a, 4, 100*time.Millisecond)
		h.served(2, a, 4, 50*time.Millisecond)
	}
	for i := range 4 {
		z := netx.DomainAddr("z"+string(rune('0'+i))+".example", 443)
		h.served(1, z, 4, 10*time.Millisecond)
		h.served(2, z, 4, 1000*time.Millisecond)
	}
	basis, g, known := h.e.PairBasis(scope(target(99), 1), scope(target(99), 1), scope(target(99), 2))
	if basis != 2 || !known[0] || g[0] < 0.45 || g[0] > 0.55 {
		t.Fatalf("basis %d gain %v known %v, want the first eight targets' +0.5", basis, g[0], known[0])
	}
}

func TestPromotionProbeCohort(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.served(2, target(9), 6, 50*time.Millisecond) // trained elsewhere, unpaired
	for range 4 {
		h.e.Probe(netx.TCP, node(1), h.now(), 100*time.Millisecond, true, 30*time.Second)
		h.e.Probe(netx.TCP, node(2), h.now(), 50*time.Millisecond, true, 30*time.Second)
		h.clk.Advance(time.Second)
	}
	if basis, _, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2)); basis != 3 || !known[0] {
		t.Fatalf("basis %d known %v, want the probe cohort", basis, known)
	}
	if d := h.rank(tgt); d.Index != 1 || d.Reason != score.PerformanceWinner {
		t.Fatalf("decision %d %v", d.Index, d.Reason)
	}
	// The weaker side's latest support + max(60 s, 2I) ends it.
	h.clk.Advance(61 * time.Second)
	if _, _, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2)); known[0] {
		t.Fatal("probe support outlived max(60s, 2I) after the latest probe")
	}
}

// A zero cadence gives no comparison proof.
func TestPromotionProbeZeroCadence(t *testing.T) {
	h := newEng(t, 2)
	for range 4 {
		h.e.Probe(netx.TCP, node(1), h.now(), 100*time.Millisecond, true, 0)
		h.e.Probe(netx.TCP, node(2), h.now(), 50*time.Millisecond, true, 0)
	}
	if basis, _, _ := h.e.PairBasis(scope(target(1), 1), scope(target(1), 1), scope(target(1), 2)); basis != 0 {
		t.Fatalf("basis %d from a zero cadence", basis)
	}
}

func TestPromotionDirectionalGoodput(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.bulk(1, tgt, 4, 100*time.Millisecond, 1<<20, 1<<20)
	h.bulk(2, tgt, 6, 100*time.Millisecond, 1<<20, 2<<20)
	_, g, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2))
	if !known[0] || !known[1] || !known[2] || g[2] < 0.9 {
		t.Fatalf("gains %v known %v", g, known)
	}
	if d := h.rank(tgt); d.Index != 1 || d.Reason != score.PerformanceWinner {
		t.Fatalf("decision %d %v", d.Index, d.Reason)
	}
}

func TestPromotionDirectionalTradeoff(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.bulk(1, tgt, 4, 100*time.Millisecond, 1<<20, 1<<20)
	h.bulk(2, tgt, 6, 100*time.Millisecond, 2<<20, 512<<10)
	if d := h.rank(tgt); d.Index != 0 || d.Reason != score.DirectionalTradeoffHeld {
		t.Fatalf("decision %d %v, want a held tradeoff", d.Index, d.Reason)
	}
}

// Too little data leaves a direction unknown, not a loss.
func TestPromotionUnknownDirection(t *testing.T) {
	tgt := target(1)
	h := incumbent(t, tgt)
	h.bulk(1, tgt, 4, 100*time.Millisecond, 1<<20, 1<<20)
	h.bulk(2, tgt, 6, 100*time.Millisecond, 1000, 2<<20)
	_, g, known := h.e.PairBasis(scope(tgt, 1), scope(tgt, 1), scope(tgt, 2))
	if known[1] || !known[2] {
		t.Fatalf("known %v gains %v: up must stay unknown", known, g)
	}
	if d := h.rank(tgt); d.Index != 1 || d.Reason != score.PerformanceWinner {
		t.Fatalf("decision %d %v", d.Index, d.Reason)
	}
}

// A reliability win beyond both bounds promotes as reliabilityWinner.
func TestPromotionReliability(t *testing.T) {
	tgt := target(1)
	h := newEng(t, 2)
	h.served(1, tgt, 8, 100*time.Millisecond)
	h.rank(tgt) // leaf 1 is the incumbent
	for range 6 {
		h.e.FlowOn(scope(tgt, 1), h.now()).Fail(h.now(), score.Failure{Kind: score.TargetPath})
		h.clk.Advance(time.Second)
		h.served(1, tgt, 4, 100*time.Millisecond) // recovers each time: four reporters
	}
	h.served(2, tgt, 20, 100*time.Millisecond)
	if d := h.rank(tgt); d.Index != 1 || d.Reason != score.ReliabilityWinner {
		t.Fatalf("decision %d %v, want leaf 2 by reliabilityWinner", d.Index, d.Reason)
	}
}
