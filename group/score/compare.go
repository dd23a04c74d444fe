package score

// # The comparison store
//
// Promotion needs paired evidence: the incumbent and a challenger
// measured over the same recent time blocks. The comparison store keeps,
// per (group, network, family, target, node) — the exact key — and per
// configured-probe cohort (group, network, node, cadence), four retained
// time blocks of response latency and of up/down goodput, each metric
// with the distinct reporters that fed it. It is separate from the
// evidence LRUs, capped at CompareCells cells and CompareBytes of
// logically accounted allocation (compareCellBytes per cell plus the
// capacity of its owned target name, and the store's index and vector
// capacity), and memory-only. A full store evicts its least recently fed
// cell; eviction or refusal leaves comparison evidence unknown — a read
// never falls back to an unrelated average.

import (
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"

	"switchyard/health"
	"switchyard/netx"
)

// Comparison store constants.
const (
	CompareCells     = 512
	CompareBytes     = 1 << 20
	BlockWidth       = 15 * time.Second // a business comparison block
	Blocks           = 4                // retained blocks per cell
	BlockExpiry      = 60 * time.Second // a business block expires at its start plus this
	MaxCommonTargets = 8                // common targets a pair reads at most
	// EquivalenceBand is the practical-equivalence tolerance of every
	// compared metric: a 10 % difference is no difference.
	EquivalenceBand = 0.10
)

type cmpMetric uint8

const (
	cmpResponse cmpMetric = iota // response latency, ms (lower is better)
	cmpUp                        // accepted-TX goodput, bytes/s
	cmpDown                      // delivered-RX goodput, bytes/s
	nCmp
)

// cmpKey keys a comparison cell. Business cells have cadence 0 and a
// target (the zero target for targetless work is never stored); probe
// cells have no target, family noFamily and their producer's cadence.
type cmpKey struct {
	group   GroupID
	node    health.NodeID
	net     netx.Network
	fam     uint8
	cadence time.Duration
	tgt     target
}

// cmpNode is a (group, network, family, node) index entry: its cells.
type cmpNode struct {
	group GroupID
	node  health.NodeID
	net   netx.Network
	fam   uint8
}

func (k cmpKey) owner() cmpNode { return cmpNode{k.group, k.node, k.net, k.fam} }

type acc struct {
	sum float64
	n   uint32
	nid uint8
	ids [CompareReporters]uint64
}

// CompareReporters is the number of distinct reporters each side of a
// pair needs per metric.
const CompareReporters = 4

func (a *acc) add(v float64, id uint64) {
	a.sum += v
	a.n++
	for _, x := range a.ids[:a.nid] {
		if x == id {
			return
		}
	}
	if int(a.nid) < CompareReporters {
		a.ids[a.nid] = id
		a.nid++
	}
}

type block struct {
	start int64 // 0: empty
	m     [nCmp]acc
}

type cmpCell struct {
	key    cmpKey
	width  int64 // block width
	blocks [Blocks]block
	latest int64 // latest sample (a probe cohort's latest support)
	used   int64 // LRU stamp
}

// compareCellBytes is the accounted allocation of one cell besides its
// name: the cell, its index map entry and its vector and node-index
// slots.
const compareCellBytes = int64(unsafe.Sizeof(cmpCell{})) + int64(unsafe.Sizeof(cmpKey{})) + 3*int64(unsafe.Sizeof(uintptr(0)))

type compareStore struct {
	mu    sync.Mutex
	cells map[cmpKey]*cmpCell
	vec   []*cmpCell // every cell; its capacity is accounted
	nodes map[cmpNode][]*cmpCell
	bytes int64
	tick  int64
	gen   uint64 // moves with every change a pair read depends on
	shape uint64 // moves with every cell inserted or removed (cmpMemo)
}

func newCompareStore() *compareStore {
	return &compareStore{cells: make(map[cmpKey]*cmpCell), vec: make([]*cmpCell, 0, CompareCells), nodes: make(map[cmpNode][]*cmpCell)}
}

func (s *compareStore) accounted() int64 {
	return s.bytes + int64(cap(s.vec))*int64(unsafe.Sizeof(uintptr(0)))
}

// Len and Bytes are the store's size and accounted allocation.
func (s *compareStore) size() (cells int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.cells), s.accounted()
}

func cellBytes(k cmpKey) int64 { return compareCellBytes + int64(len(k.tgt.text)) }

// cell returns k's cell, admitting a new one when admit allows: the
// least recently fed cells are evicted to stay within both caps.
func (s *compareStore) cell(k cmpKey, width int64, admit bool) *cmpCell {
	s.tick++
	if c := s.cells[k]; c != nil {
		c.used = s.tick
		return c
	}
	if !admit {
		return nil
	}
	need := cellBytes(k)
	for len(s.cells) > 0 && (len(s.cells) >= CompareCells || s.accounted()+need > CompareBytes) {
		s.evictOldest()
	}
	if s.accounted()+need > CompareBytes {
		return nil // refused: the evidence stays unknown
	}
	c := &cmpCell{key: k, width: width, used: s.tick}
	s.shape++
	s.cells[k] = c
	s.vec = append(s.vec, c)
	o := k.owner()
	s.nodes[o] = append(s.nodes[o], c)
	s.bytes += need
	return c
}

func (s *compareStore) evictOldest() {
	oldest := 0
	for i, c := range s.vec {
		if c.used < s.vec[oldest].used {
			oldest = i
		}
	}
	s.remove(s.vec[oldest])
}

func (s *compareStore) remove(c *cmpCell) {
	delete(s.cells, c.key)
	if i := slices.Index(s.vec, c); i >= 0 {
		last := len(s.vec) - 1
		s.vec[i], s.vec[last] = s.vec[last], nil
		s.vec = s.vec[:last]
	}
	o := c.key.owner()
	l := s.nodes[o]
	if i := slices.Index(l, c); i >= 0 {
		l = slices.Delete(l, i, i+1)
	}
	if len(l) == 0 {
		delete(s.nodes, o)
	} else {
		s.nodes[o] = l
	}
	s.bytes -= cellBytes(c.key)
	s.gen++
	s.shape++
}

// add records sample v of metric m at at from reporter id.
func (s *compareStore) add(k cmpKey, width int64, m cmpMetric, at int64, v float64, id uint64, admit bool) {
	if width <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cell(k, width, admit)
	if c == nil {
		return
	}
	start := at - at%c.width
	slot, oldest := -1, 0
	for i := range c.blocks {
		if c.blocks[i].start == start {
			slot = i
			break
		}
		if c.blocks[i].start < c.blocks[oldest].start {
			oldest = i
		}
	}
	if slot < 0 {
		if c.blocks[oldest].start > start {
			return // older than every retained block
		}
		slot = oldest
		c.blocks[slot] = block{start: start}
	}
	c.blocks[slot].m[m].add(v, id)
	c.latest = max(c.latest, at)
	s.gen++
}

// fence drops the comparison evidence of node in (group, network): of
// one exact target, or with every target when tgt is nil (a node-scoped
// failure also fences its probe cohorts).
func (s *compareStore) fence(group GroupID, net netx.Network, node health.NodeID, fam netx.Family, tgt *target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if tgt != nil {
		if c := s.cells[cmpKey{group: group, node: node, net: net, fam: uint8(fam), tgt: *tgt}]; c != nil {
			s.remove(c)
		}
		return
	}
	for _, f := range [...]uint8{uint8(netx.V4), uint8(netx.V6), noFamily} {
		for _, c := range slices.Clone(s.nodes[cmpNode{group, node, net, f}]) {
			s.remove(c)
		}
	}
}

// reset drops every cell: a committed reload fences all comparison
// evidence.
func (s *compareStore) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.cells)
	clear(s.nodes)
	clear(s.vec)
	s.vec = s.vec[:0]
	s.bytes = 0
	s.gen++
	s.shape++
}

// side is one side of a metric over the shared blocks.
type side struct {
	sum float64
	n   uint32
	nid int
	ids [CompareReporters]uint64
}

func (sd *side) add(a *acc) {
	sd.sum += a.sum
	sd.n += a.n
	for _, id := range a.ids[:a.nid] {
		if sd.nid < CompareReporters && !slices.Contains(sd.ids[:sd.nid], id) {
			sd.ids[sd.nid] = id
			sd.nid++
		}
	}
}

func (sd *side) known() bool   { return sd.n > 0 && sd.nid >= CompareReporters }
func (sd *side) mean() float64 { return sd.sum / float64(sd.n) }

// metricGain is one compared metric: the challenger's relative gain over
// the incumbent (positive: better), known only with four distinct
// reporters per side in shared live blocks.
type metricGain struct {
	gain  float64
	known bool
}

// pairBasis names what a pair's evidence came from.
type pairBasis uint8

const (
	basisNone   pairBasis = iota
	basisExact            // the exact target
	basisCommon           // common targets
	basisProbe            // the current configured-probe cohort
)

// pairResult is one (incumbent, challenger) comparison.
type pairResult struct {
	basis pairBasis
	m     [nCmp]metricGain
	// partial: matched common targets were skipped (unqualified or over
	// the cap), so the response gap stays pending.
	partial bool
	// resp is the known response's values and expiry, filled only for a
	// readonly relation (pair's detail argument).
	resp respDetail
	// reporters is the pair question's progress: the challenger's
	// distinct response reporters in live blocks it shares with the
	// reference, on the exact target (on the most advanced common target
	// for an aggregate read).
	reporters int
}

// noCut reads every shared live block: no freshness cut.
const noCut = math.MinInt64

// probeResponse is the response gain of probe cell c over probe cell i
// on their shared live blocks at now that start after after: what
// comparePairShared's response metric is for a probe pair, with the
// cohort's expiry checked before any block is read and no other metric
// summed (a probe cohort settles the response only).
func probeResponse(i, c *cmpCell, now int64, after int64) metricGain {
	if min(i.latest, c.latest)+int64(max(BlockExpiry, time.Duration(i.width))) <= now {
		return metricGain{}
	}
	var si, sc side
	for bi := range i.blocks {
		b := &i.blocks[bi]
		if b.start == 0 || b.start <= after || !blockLive(b.start, i.width, now, true) {
			continue
		}
		for bj := range c.blocks {
			if c.blocks[bj].start == b.start {
				si.add(&b.m[cmpResponse])
				sc.add(&c.blocks[bj].m[cmpResponse])
			}
		}
	}
	if !si.known() || !sc.known() {
		return metricGain{}
	}
	a, b := si.mean(), sc.mean()
	if a <= 0 {
		return metricGain{}
	}
	return metricGain{gain: (a - b) / a, known: true}
}

// sharedSides sums both cells' metrics over their shared live blocks at
// now that start after after.
func sharedSides(i, c *cmpCell, now int64, probe bool, after int64) (si, sc [nCmp]side, shared bool) {
	for bi := range i.blocks {
		b := &i.blocks[bi]
		if b.start == 0 || b.start <= after || !blockLive(b.start, i.width, now, probe) {
			continue
		}
		for bj := range c.blocks {
			if c.blocks[bj].start != b.start {
				continue
			}
			shared = true
			for m := range si {
				si[m].add(&b.m[m])
				sc[m].add(&c.blocks[bj].m[m])
			}
		}
	}
	return si, sc, shared
}

// comparePairShared is comparePair, also reporting whether the cells
// share any live block at all and the challenger's distinct response
// reporters in them (up to CompareReporters).
func comparePairShared(i, c *cmpCell, now int64, probe bool, after int64) (out [nCmp]metricGain, shared bool, chReporters int) {
	si, sc, shared := sharedSides(i, c, now, probe, after)
	chReporters = sc[cmpResponse].nid
	if probe {
		// The weaker side's latest support bounds the cohort too.
		w := time.Duration(i.width)
		if min(i.latest, c.latest)+int64(max(BlockExpiry, w)) <= now {
			return out, shared, chReporters
		}
	}
	for m := range out {
		if !si[m].known() || !sc[m].known() {
			continue
		}
		a, b := si[m].mean(), sc[m].mean()
		if a <= 0 {
			continue
		}
		if cmpMetric(m) == cmpResponse {
			out[m] = metricGain{gain: (a - b) / a, known: true}
		} else {
			out[m] = metricGain{gain: (b - a) / a, known: true}
		}
	}
	return out, shared, chReporters
}

// blockLive: a business block lives until its start plus BlockExpiry; a
// probe block until its start plus four block widths (the cadence-aware
// retention: max(15 s, 2I) wide, four retained).
func blockLive(start, width, now int64, probe bool) bool {
	if probe {
		return start+Blocks*width > now
	}
	return start+int64(BlockExpiry) > now
}

// probeWidth is a probe cohort's block width for cadence d: max(15 s,
// 2I); an unknown cadence (negative) keeps the business width; zero or
// one too large to represent gives none (no comparison proof).
func probeWidth(d time.Duration) int64 {
	switch {
	case d < 0:
		return int64(BlockWidth)
	case d == 0 || d > time.Duration(1<<62)/2:
		return 0
	}
	return int64(max(BlockWidth, 2*d))
}
