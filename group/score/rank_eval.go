package score

import (
	"math"
	"time"
)

// Ranking constants (see the package documentation for why).
const (
	// PerfWeight is the weight of the first-choice performance heuristic
	// in utility, against the blended success rate's weight of 1.
	PerfWeight = 0.25
	// HoldMargin is the largest margin a challenger's combined gain must
	// clear against a mature incumbent; the margin grows with the
	// incumbent's support up to it.
	HoldMargin = 0.005
	// HoldSupport is the support (decayed completions, the largest
	// layer's) at which an incumbent's protection is mature.
	HoldSupport = 2 * Qualify
	// missingPerf is a missing or expired metric's normalized score for
	// a row without a valid probe: as if half as good as the best,
	// neither a win nor a loss.
	missingPerf = 0.5
)

// holdMargin is the margin for an incumbent of support s.
func holdMargin(s float64) float64 { return HoldMargin * min(1, s/HoldSupport) }

// utilities fills sc.util and each candidate's Utility: the blended
// success rate plus PerfWeight × the performance heuristic, each metric
// normalized in its own scope against the best of the reference rows
// (the serving pool's members, or every candidate before the pool
// exists): probe RTT, setup latency, response latency (lower is better)
// and up/down goodput (higher is better), each weighted by its
// confidence. What a row lacks of a metric (all of it when missing or
// expired, the confidence it lost when aging) scores its probe baseline.
func (sc *rankScratch) utilities(cands []Candidate, ref, need []bool, rows []int) {
	var best [nMetrics + 1]float64
	var have [nMetrics + 1]bool
	var rowsWith [nMetrics + 1]int
	for _, i := range rows {
		if !ref[i] {
			continue
		}
		for m := range int(nMetrics) + 1 {
			v, _, ok := sc.metric(i, m)
			if !ok {
				continue
			}
			rowsWith[m]++
			if !have[m] || metricBetter(m, v, best[m]) {
				best[m], have[m] = v, true
			}
		}
	}
	// A measured metric overrides the probe baseline only where it is
	// comparable: measured on at least two reference rows. One row's
	// lone measurement is its own best, which says nothing of the others.
	for m := range int(nMetrics) {
		have[m] = have[m] && rowsWith[m] >= 2
	}
	for i := range cands {
		if !need[i] {
			cands[i].Utility = 0
		}
	}
	for _, i := range rows {
		base := sc.probeBaseline(i, have[probeMetric], best[probeMetric])
		var sum float64
		var k int
		for m := range int(nMetrics) + 1 {
			if !have[m] {
				continue
			}
			k++
			v, conf, ok := sc.metric(i, m)
			if !ok {
				sum += base
				continue
			}
			sum += conf*ratio(m, v, best[m]) + (1-conf)*base
		}
		perf := missingPerf
		if k > 0 {
			perf = sum / float64(k)
		}
		sc.perf[i] = perf
		sc.util[i] = sc.views[i].Rate + PerfWeight*perf
		cands[i].Utility = sc.util[i]
	}
}

// probeBaseline is row i's score for what it lacks of a metric: its own
// normalized probe RTT (against best, the reference rows' best, when
// some row has one), or missingPerf without a valid probe. The spec: the
// configured probe RTT supplies a baseline, which fresh comparable
// target response and goodput override. Only the probe's normalized
// score, a ratio within its own scope, carries over, never its
// milliseconds: a member measured 50 times slower to the probe does not
// read as half as good as the best on a target it has not served yet.
func (sc *rankScratch) probeBaseline(i int, have bool, best float64) float64 {
	if have {
		if v, _, ok := sc.metric(i, probeMetric); ok {
			return ratio(probeMetric, v, best)
		}
	}
	return missingPerf
}

// probeMetric is the index of the probe RTT among sc.metric's metrics.
const probeMetric = int(nMetrics)

func metricBetter(m int, v, than float64) bool {
	if m == int(metricUp) || m == int(metricDown) {
		return v > than
	}
	return v < than
}

// ratio is a value's normalized score against the best: 1 for the best,
// less for worse.
func ratio(m int, v, best float64) float64 {
	if m == int(metricUp) || m == int(metricDown) {
		if best <= 0 {
			return 1
		}
		return v / best
	}
	if v <= 0 {
		return 1
	}
	return math.Min(1, best/v)
}

// metric reads metric m of row i: the first-choice metrics, or the
// probe RTT (m == probeMetric, full confidence while valid).
func (sc *rankScratch) metric(i, m int) (v, conf float64, ok bool) {
	if m == probeMetric {
		p := sc.views[i].Probe
		if !p.Valid || p.RTT <= 0 {
			return 0, 0, false
		}
		return float64(p.RTT) / float64(time.Millisecond), 1, true
	}
	pr := sc.views[i].perf[m]
	return pr.v, pr.conf, pr.ok
}

// qualifiedIn reports a row's qualification in the rank's own scope: the
// exact cell for a targeted rank, the family aggregate otherwise.
func qualifiedIn(v *rankView, targeted bool) bool {
	if targeted {
		return v.Exact.Qualified
	}
	return v.Family.Qualified
}

// trained reports mature evidence: qualification, or decayed support of
// Qualify completions.
func trained(v *rankView, targeted bool) bool {
	return qualifiedIn(v, targeted) || v.Support >= Qualify
}

// promotion is one challenger's case against the incumbent.
type promotion struct {
	gain     float64 // combined gain (0: none)
	reason   Reason  // ReliabilityWinner or PerformanceWinner when gain > 0
	tradeoff bool    // opposing known directional changes
	compared bool    // a qualified shared response comparison exists
}

// promote judges challenger c against incumbent i on their blended
// evidence and their paired comparison pr, the incumbent's protection
// coming from its support.
func promote(i, c *rankView, pr pairResult, targeted bool) promotion {
	var p promotion
	cq := trained(c, targeted)
	resp := pr.m[cmpResponse]
	p.compared = resp.known
	var rel float64
	if cq && c.Lower > i.Upper {
		rel = c.Rate - i.Rate // a reliability gain beyond both bounds
	}
	asGood := cq && observed(c, targeted) >= observed(i, targeted)
	notWorse := cq && i.Lower <= c.Upper
	slower := resp.known && resp.gain < -EquivalenceBand
	var respGain float64
	if resp.known && resp.gain > EquivalenceBand && notWorse {
		respGain = resp.gain
	}
	up, down := pr.m[cmpUp], pr.m[cmpDown]
	gainDir := up.known && up.gain >= EquivalenceBand || down.known && down.gain >= EquivalenceBand
	regDir := up.known && up.gain < -EquivalenceBand || down.known && down.gain < -EquivalenceBand
	p.tradeoff = gainDir && regDir
	var dir float64
	if gainDir && !regDir && !slower && asGood {
		if up.known {
			dir = max(dir, up.gain)
		}
		if down.known {
			dir = max(dir, down.gain)
		}
	}
	if slower && rel == 0 {
		return p
	}
	g := rel + respGain + dir
	if g <= holdMargin(i.Support) {
		return p
	}
	p.gain = g
	p.reason = PerformanceWinner
	if rel > 0 && rel >= respGain+dir {
		p.reason = ReliabilityWinner
	}
	return p
}

// observed is a row's observed terminal success share in the rank's
// scope (1 without outcomes): what "reliability at least as good"
// compares, free of the posterior's pull toward one half.
func observed(v *rankView, targeted bool) float64 {
	l := v.Family
	if targeted {
		l = v.Exact
	}
	if l.Successes+l.Failures <= 0 {
		return 1
	}
	return l.Successes / (l.Successes + l.Failures)
}
