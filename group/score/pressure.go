package score

// # Freshness: response degradation and carrier-pressure hints
//
// A pair question asks for a fresh, non-partial business response of the
// rank's scope newer than the selection's latest degradation. Two events
// move that cut — they reopen comparison freshness and nothing else:
// utility, qualification, failure counts, health, promotion (which reads
// every live block) and existing flows are untouched, and a reopened
// question still goes through the walk's cadence, eligibility, budget
// and backoff.
//
//   - Response degradation. A setup or response sample of a targeted
//     flow is compared only with the same exact target's history (the
//     cell's own four-observation metric, while unexpired): it degrades
//     when it is at least DegradeRatio times that history and
//     DegradeExcess above it — the carrier-pressure RTT rule's
//     proportions, so that ordinary jitter of a fast target reopens
//     nothing. The cut is the sample's time, and only blocks starting
//     after it answer the selection's pairs on that target. Aggregate
//     cells mix targets of unrelated latency: no sample degrades them,
//     so an aggregate read's cut is the carrier pressure alone.
//   - Carrier pressure (Engine.Pressure). A fresh hint of a Score-bound
//     runtime (internal/pressure's Hint: time, family, kind; no identity)
//     is a node-owner comparison question: for HintLifetime after its
//     event it cuts every pair of that node on the network, as the
//     selection or as the challenger, whatever the target or family. A
//     reload fences prior hints (the configuration's per-leaf state
//     starts afresh and a hint older than the reload is dropped); reads
//     never refresh one.

import (
	"sync/atomic"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// Freshness constants.
const (
	// HintLifetime is how long a carrier-pressure hint cuts freshness.
	HintLifetime = 60 * time.Second
	// DegradeRatio and DegradeExcess make a sample a degradation of its
	// exact target's history: at least DegradeRatio times it and
	// DegradeExcess above it.
	DegradeRatio  = 1.5
	DegradeExcess = 20 * time.Millisecond
)

// Pressure records a carrier-pressure hint published at at for node's
// runtime on network (the networks its carrier carries; the caller
// passes the hint's At). It reopens comparison freshness of node's pairs
// in every Score group holding it, for HintLifetime; a hint from before
// the latest Configure, or already expired at at's own age, is dropped
// by the next read, and a later hint replaces an earlier one.
func (e *Engine) Pressure(node health.NodeID, network netx.Network, at time.Time) {
	cfg := e.cfg.Load()
	t := at.UnixNano()
	if t < cfg.at {
		return // fenced by the reload
	}
	ni := netIndex(network)
	for _, id := range cfg.byNode[node] {
		g := cfg.groups[id]
		if g == nil {
			continue
		}
		ls := g.leaves[node]
		if ls == nil {
			continue
		}
		storeMax(&ls.hint[ni], t)
		storeMax(&g.hinted[ni], t)
	}
}

// storeMax raises a to t.
func storeMax(a *atomic.Int64, t int64) {
	for {
		old := a.Load()
		if old >= t || a.CompareAndSwap(old, t) {
			return
		}
	}
}

// hintsFresh reports whether any leaf of g may hold a fresh hint on
// network ni at now.
func (g *groupState) hintsFresh(ni int, now int64) bool {
	h := g.hinted[ni].Load()
	return h != 0 && now-h < int64(HintLifetime)
}

// hintCut is node's freshness cut on network ni at now: its latest hint
// while fresh, else noCut.
func (g *groupState) hintCut(node health.NodeID, ni int, now int64) int64 {
	if !g.hintsFresh(ni, now) {
		return noCut
	}
	return g.leaves[node].cut(ni, now)
}

// cut is the leaf's freshness cut on network ni at now (ls may be nil).
func (ls *leafState) cut(ni int, now int64) int64 {
	if ls == nil {
		return noCut
	}
	h := ls.hint[ni].Load()
	if h == 0 || now-h >= int64(HintLifetime) {
		return noCut
	}
	return h
}

// degrade records at t a degradation of metric m when sample v (ms)
// degrades against the cell's own unexpired history.
func (c *cell) degrade(m metric, t int64, v float64) {
	if t <= c.fence {
		return
	}
	old, _, ok := perfOf(c, m, t)
	if ok && v >= DegradeRatio*old && v-old >= float64(DegradeExcess)/float64(time.Millisecond) {
		c.degraded = max(c.degraded, t)
	}
}
