package score

import (
	"slices"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// The comparison store's pair reads: promotion's evidence, the walk's
// pair questions (with a freshness cut) and the readonly relations
// (with the response's values and expiry).

// respDetail is a known response comparison's actual values (ms) and
// the time it stops being known without new samples.
type respDetail struct {
	sel, ch float64
	expires int64
}

// responseDetail reads the response metric of the pair (i, c) at now:
// both sides' means and its expiry — the expiry of the shared block
// whose loss leaves a side without its four reporters (blocks expire
// oldest first), and for a probe cohort also the weaker side's latest
// support bound. ok is false when the response is not known.
func responseDetail(i, c *cmpCell, now int64, probe bool) (d respDetail, ok bool) {
	si, sc, _ := sharedSides(i, c, now, probe, noCut)
	if !si[cmpResponse].known() || !sc[cmpResponse].known() {
		return d, false
	}
	if probe && min(i.latest, c.latest)+int64(max(BlockExpiry, time.Duration(i.width))) <= now {
		return d, false
	}
	d.sel, d.ch = si[cmpResponse].mean(), sc[cmpResponse].mean()
	// The shared live starts, ascending.
	var starts [Blocks]int64
	n := 0
	for bi := range i.blocks {
		st := i.blocks[bi].start
		if st == 0 || !blockLive(st, i.width, now, probe) {
			continue
		}
		for bj := range c.blocks {
			if c.blocks[bj].start == st {
				starts[n] = st
				n++
				break
			}
		}
	}
	slices.Sort(starts[:n])
	life := int64(BlockExpiry)
	if probe {
		life = Blocks * i.width
	}
	d.expires = starts[n-1] + life
	for _, st := range starts[:n] {
		a, b, _ := sharedSides(i, c, now, probe, st)
		if !a[cmpResponse].known() || !b[cmpResponse].known() {
			d.expires = st + life
			break
		}
	}
	if probe {
		d.expires = min(d.expires, min(i.latest, c.latest)+int64(max(BlockExpiry, time.Duration(i.width))))
	}
	return d, true
}

// pair reads the promotion evidence of challenger c against incumbent i
// in (group, network, family) for target tgt (hasTarget false: an
// aggregate read): the exact target's pair when its response is known;
// otherwise at most MaxCommonTargets response-qualified common targets
// in canonical order, weighted equally; otherwise the same current
// configured-probe cohort (response only: a probe proves no goodput).
//
// Only blocks starting after after count (noCut: every live block): a
// question's freshness cut. With detail, a known response also carries
// its actual values and its expiry (pairResult.resp): what a readonly
// relation reports.
func (s *compareStore) pair(group GroupID, net netx.Network, fam netx.Family, i, c health.NodeID, tgt target, hasTarget bool, now, after int64, detail bool) pairResult {
	ref := s.lockRef(group, net, fam, i, tgt, hasTarget, now, nil, 0)
	defer ref.unlock()
	return ref.pair(c, after, detail)
}

// cmpMemoSlots bounds a memo row: the exact cell, the common targets and
// the probe cohorts of one incumbent; an incumbent with more is read
// without the memo.
const cmpMemoSlots = 24

// cmpMemo remembers, for one incumbent's batch (its group, network,
// family, node and target), the incumbent's cells and, per rank row, the
// challenger's cell matching each of them: valid while the store inserted
// or removed no cell (its shape), so a later rank against the same
// incumbent skips the lookups. It holds cell pointers, never values:
// every value is read again at the rank's time, under the store's lock.
type cmpMemo struct {
	valid     bool
	s         *compareStore
	shape     uint64
	key       cmpKey // the incumbent's exact key (tgt empty without a target)
	hasTarget bool
	exact     *cmpCell
	common    []*cmpCell
	probes    []*cmpCell
	width     int // slots per row: 1 + len(common) + len(probes)
	nodes     []health.NodeID
	cells     []*cmpCell // rows × width
	have      []bool     // rows × width: looked up (the cell may be nil)
}

// row selects row i (its challenger c) of a pair batch: a row remembered
// for another challenger is forgotten.
func (m *cmpMemo) row(i int, c health.NodeID) {
	if m.nodes[i] != c {
		m.nodes[i] = c
		clear(m.have[i*m.width : (i+1)*m.width])
	}
}

// pairRef is a batch of pair reads against one incumbent under one lock
// of the store: the incumbent's cells are looked up once.
type pairRef struct {
	s         *compareStore
	group     GroupID
	net       netx.Network
	fam       netx.Family
	hasTarget bool
	now       int64
	exact     *cmpCell   // the incumbent's exact cell, or nil
	common    []*cmpCell // the incumbent's cells of the family
	probes    []*cmpCell // the incumbent's probe cohorts
	memo      *cmpMemo   // the rank's memo, or nil
	base      int        // the current row's first memo slot (row)
}

// look returns the challenger's cell kc at memo slot j of the current
// row (0: the exact target, 1+j: common target j, 1+len(common)+j: probe
// cohort j).
func (r *pairRef) look(j int, kc cmpKey) *cmpCell {
	m := r.memo
	if m == nil {
		return r.s.cells[kc]
	}
	k := r.base + j
	if !m.have[k] {
		m.cells[k], m.have[k] = r.s.cells[kc], true
	}
	return m.cells[k]
}

// pairRow is pair for rank row i: the challenger's cells come from the
// memo when it holds them.
func (r *pairRef) pairRow(i int, c health.NodeID, after int64, detail bool) pairResult {
	if m := r.memo; m != nil {
		m.row(i, c)
		r.base = i * m.width
	}
	res := r.pair(c, after, detail)
	r.base = 0
	return res
}

// lockRef locks the store and returns the batch of incumbent i's pairs;
// the caller calls unlock.
//
// m (nil: none) is the caller's memo over rows rows; a memo of another
// incumbent or an older shape is refilled.
func (s *compareStore) lockRef(group GroupID, net netx.Network, fam netx.Family, i health.NodeID, tgt target, hasTarget bool, now int64, m *cmpMemo, rows int) pairRef {
	s.mu.Lock()
	r := pairRef{s: s, group: group, net: net, fam: fam, hasTarget: hasTarget, now: now}
	key := cmpKey{group: group, node: i, net: net, fam: uint8(fam)}
	if hasTarget {
		key.tgt = tgt
	}
	if m != nil && m.valid && m.s == s && m.shape == s.shape && m.hasTarget == hasTarget && m.key == key && len(m.nodes) == rows {
		r.exact, r.common, r.probes, r.memo = m.exact, m.common, m.probes, m
		return r
	}
	if hasTarget {
		r.exact = s.cells[key]
	}
	r.common = s.nodes[cmpNode{group, i, net, uint8(fam)}]
	r.probes = s.nodes[cmpNode{group, i, net, noFamily}]
	if m == nil {
		return r
	}
	m.valid = false
	w := 1 + len(r.common) + len(r.probes)
	if w > cmpMemoSlots {
		return r
	}
	m.valid, m.s, m.shape, m.key, m.hasTarget = true, s, s.shape, key, hasTarget
	m.exact, m.common, m.probes, m.width = r.exact, r.common, r.probes, w
	if cap(m.nodes) < rows {
		m.nodes = make([]health.NodeID, rows)
	}
	if cap(m.cells) < rows*w {
		m.cells, m.have = make([]*cmpCell, rows*w), make([]bool, rows*w)
	}
	m.nodes, m.cells, m.have = m.nodes[:rows], m.cells[:rows*w], m.have[:rows*w]
	clear(m.nodes)
	clear(m.have)
	r.memo = m
	return r
}

func (r *pairRef) unlock() { r.s.mu.Unlock() }

// pair is compareStore.pair of challenger c under the batch's lock.
func (r *pairRef) pair(c health.NodeID, after int64, detail bool) pairResult {
	now := r.now
	var res pairResult
	var exactC *cmpCell // the challenger's cell of the exact target, looked up once
	if r.exact != nil {
		kc := r.exact.key
		kc.node = c
		exactC = r.look(0, kc)
		if ci, cc := r.exact, exactC; cc != nil {
			g, _, rep := comparePairShared(ci, cc, now, false, after)
			res.reporters = rep
			if g[cmpResponse].known {
				res := pairResult{basis: basisExact, m: g, reporters: rep}
				if detail {
					res.resp, _ = responseDetail(ci, cc, now, false)
				}
				return res
			}
		}
	}
	// Common targets: the incumbent's cells with a challenger cell of
	// the same target, response-qualified, in canonical order.
	var picked [MaxCommonTargets]struct {
		text string
		g    [nCmp]metricGain
		ci   *cmpCell
		cc   *cmpCell
	}
	np := 0
	for j, ci := range r.common {
		if ci.key.cadence != 0 {
			continue
		}
		var cc *cmpCell
		if ci == r.exact {
			cc = exactC
		} else {
			kc := ci.key
			kc.node = c
			cc = r.look(1+j, kc)
		}
		if cc == nil {
			continue
		}
		g, shared, rep := comparePairShared(ci, cc, now, false, after)
		if !r.hasTarget {
			res.reporters = max(res.reporters, rep)
		}
		if !g[cmpResponse].known {
			// Unqualified matched targets leave the comparison partial;
			// those without common live blocks are outside the cohort.
			res.partial = res.partial || shared
			continue
		}
		text := ci.key.tgt.text
		// Keep the first MaxCommonTargets in canonical order.
		pos := np
		for pos > 0 && picked[pos-1].text > text {
			pos--
		}
		if pos >= MaxCommonTargets {
			res.partial = true
			continue
		}
		if np == MaxCommonTargets {
			res.partial = true
			np--
		}
		copy(picked[pos+1:np+1], picked[pos:np])
		picked[pos].text, picked[pos].g = text, g
		picked[pos].ci, picked[pos].cc = ci, cc
		np++
	}
	if np > 0 {
		res.basis = basisCommon
		if detail {
			// The chosen targets weigh equally: each side's value is the
			// mean of its per-target means; the relation expires with the
			// first of them.
			for j, p := range picked[:np] {
				d, _ := responseDetail(p.ci, p.cc, now, false)
				res.resp.sel += d.sel / float64(np)
				res.resp.ch += d.ch / float64(np)
				if j == 0 || d.expires < res.resp.expires {
					res.resp.expires = d.expires
				}
			}
		}
		for m := range res.m {
			var sum float64
			var n int
			for _, p := range picked[:np] {
				if p.g[m].known {
					sum += p.g[m].gain
					n++
				}
			}
			// A direction must qualify across the same chosen cohort.
			if n == np {
				res.m[m] = metricGain{gain: sum / float64(n), known: true}
			}
		}
		return res
	}
	// The configured-probe cohort of the same cadence.
	for j, pi := range r.probes {
		if pi.key.cadence == 0 {
			continue
		}
		kc := pi.key
		kc.node = c
		pc := r.look(1+len(r.common)+j, kc)
		if pc == nil {
			continue
		}
		if g := probeResponse(pi, pc, now, after); g.known {
			pr := pairResult{basis: basisProbe, m: [nCmp]metricGain{cmpResponse: g}, partial: res.partial, reporters: res.reporters}
			if detail {
				pr.resp, _ = responseDetail(pi, pc, now, true)
			}
			return pr
		}
	}
	return res
}
