package score

// perfRead is one metric of one candidate at a rank.
type perfRead struct {
	v, conf float64
	ok      bool
}

// rankView is one candidate's evidence at a rank: its blended View and
// its first-choice metrics, each from the layer comparable across the
// candidates (setup from the node-level family aggregate; response and
// goodput from the exact target, or the family aggregate for targetless
// work).
type rankView struct {
	View
	perf [nMetrics]perfRead
	// degraded is the exact cell's latest response degradation (unix ns,
	// 0: none): the freshness cut of the node's pairs on the target.
	degraded int64
}

// rankViews reads the evidence of the candidates at rows (the evaluated
// ones) for key k (its node replaced by each candidate's) under one
// lock: the batch a per-flow rank needs, without creating a cell or
// refreshing an LRU position.
func (s *Scorer) rankViews(k exactKey, hasTarget bool, cands []Candidate, rows []int, out []rankView, now int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range rows {
		k.node = cands[i].Node
		var g, f, e *cell
		if hasTarget {
			e = s.exact.peek(k)
		}
		if e != nil && e.pf != nil && e.pg != nil && !e.pf.dead && !e.pg.dead {
			f, g = e.pf, e.pg
		} else {
			g = s.agg.peek(k.global())
			f = s.agg.peek(k.family())
		}
		if f != nil {
			f.sync(g)
		}
		if e != nil {
			e.sync(g)
		}
		rv := &out[i]
		viewInto(&rv.View, g, f, e, now)
		rv.degraded = 0
		if e != nil {
			rv.degraded = e.degraded
		}
		node := f
		if node == nil {
			node = g
		}
		rv.perf[metricSetup].v, rv.perf[metricSetup].conf, rv.perf[metricSetup].ok = perfOf(node, metricSetup, now)
		tc := f
		if hasTarget {
			tc = e
		}
		for m := metricResponse; m < nMetrics; m++ {
			rv.perf[m].v, rv.perf[m].conf, rv.perf[m].ok = perfOf(tc, m, now)
		}
	}
}
