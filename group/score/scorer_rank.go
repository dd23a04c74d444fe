package score

import "switchyard/health"

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

// viewMemo remembers, for one (group, network, family, target), which
// cells each candidate row resolved to: valid while neither table
// inserted or removed a cell (their shape sequences), so a later rank of
// the same target skips the lookups. It holds cell pointers, never
// values: every value is read again at the rank's time.
type viewMemo struct {
	valid            bool
	exactSeq, aggSeq uint64
	key              exactKey // the node zero
	nodes            []health.NodeID
	have             []bool
	cells            [][3]*cell // global, family, exact
}

// resolve returns row i's cells for k (k.node the row's node), from the
// memo when it holds them.
func (s *Scorer) resolve(m *viewMemo, k exactKey, hasTarget bool, i int) (g, f, e *cell) {
	if m.have[i] && m.nodes[i] == k.node {
		c := &m.cells[i]
		return c[0], c[1], c[2]
	}
	if hasTarget {
		e = s.exact.peek(k)
	}
	if e != nil && e.pf != nil && e.pg != nil && !e.pf.dead && !e.pg.dead {
		f, g = e.pf, e.pg
	} else {
		g = s.agg.peek(k.global())
		f = s.agg.peek(k.family())
	}
	m.have[i], m.nodes[i], m.cells[i] = true, k.node, [3]*cell{g, f, e}
	return g, f, e
}

// rankViews reads the evidence of the candidates at rows (the evaluated
// ones) for key k (its node replaced by each candidate's) under one
// lock: the batch a per-flow rank needs, without creating a cell or
// refreshing an LRU position. m is the caller's memo of the cells.
func (s *Scorer) rankViews(k exactKey, hasTarget bool, cands []Candidate, rows []int, out []rankView, now int64, m *viewMemo) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kk := k
	kk.node = health.NodeID{}
	if !m.valid || m.exactSeq != s.exact.seq || m.aggSeq != s.agg.seq || m.key != kk || len(m.nodes) != len(cands) {
		m.valid, m.exactSeq, m.aggSeq, m.key = true, s.exact.seq, s.agg.seq, kk
		n := len(cands)
		if cap(m.nodes) < n {
			m.nodes, m.have, m.cells = make([]health.NodeID, n), make([]bool, n), make([][3]*cell, n)
		}
		m.nodes, m.have, m.cells = m.nodes[:n], m.have[:n], m.cells[:n]
		clear(m.have)
	}
	for _, i := range rows {
		k.node = cands[i].Node
		g, f, e := s.resolve(m, k, hasTarget, i)
		if f != nil {
			f.sync(g)
		}
		if e != nil {
			e.sync(g)
		}
		rv := &out[i]
		rankViewInto(&rv.View, g, f, e, now)
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
