package score

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// row is one unique candidate of an Apply's view.
type row struct {
	Candidate
	key  Key
	decl int // declaration index
	rank int // position in the ranking
}

// view is an Apply's deduplicated candidates with their ranking.
type poolView struct {
	rows  []row
	by    map[Key]int // key → index in rows
	order []int       // rows in ranking order
}

// better reports whether a ranks before b: eligible first, then higher
// utility, then a known lower probe RTT, then declaration order.
func better(a, b *row) int {
	if a.Eligible != b.Eligible {
		if a.Eligible {
			return -1
		}
		return 1
	}
	if a.Utility != b.Utility {
		if a.Utility > b.Utility {
			return -1
		}
		return 1
	}
	ar, br := a.ProbeRTT, b.ProbeRTT
	if (ar > 0) != (br > 0) {
		if ar > 0 {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(ar, br); c != 0 {
		return c
	}
	return cmp.Compare(a.decl, b.decl)
}

// newPoolView deduplicates cands by slot key (the first row of a key
// wins), adds each direct member missing from them as an ineligible row
// of no utility (filtered absence keeps a member until a rerank ranks
// eligible rows above it) and ranks them all. It returns the view and
// the number of unique candidates, the added rows excluded.
func newPoolView(cands []Candidate, members []slot) (*poolView, int) {
	v := &poolView{rows: make([]row, 0, len(cands)), by: make(map[Key]int, len(cands))}
	for _, c := range cands {
		k := c.Key()
		if _, dup := v.by[k]; dup {
			continue
		}
		v.by[k] = len(v.rows)
		v.rows = append(v.rows, row{Candidate: c, key: k, decl: len(v.rows)})
	}
	n := len(v.rows)
	for _, s := range members {
		if _, ok := v.by[s.key]; !ok && s.key.Subgroup == "" {
			v.by[s.key] = len(v.rows)
			v.rows = append(v.rows, row{Candidate: Candidate{Node: s.node, Utility: math.Inf(-1)}, key: s.key, decl: len(v.rows)})
		}
	}
	v.order = make([]int, len(v.rows))
	for i := range v.order {
		v.order[i] = i
	}
	slices.SortFunc(v.order, func(a, b int) int { return better(&v.rows[a], &v.rows[b]) })
	for r, i := range v.order {
		v.rows[i].rank = r
	}
	return v, n
}

func (v *poolView) winner() int {
	for i := range v.rows {
		if v.rows[i].Winner {
			return i
		}
	}
	return -1
}

// rankOf is a member's ranking position; a member missing from the view
// ranks after every row.
func (v *poolView) rankOf(k Key) int {
	if i, ok := v.by[k]; ok {
		return v.rows[i].rank
	}
	return len(v.rows)
}

// Rerank is the authorized Apply at at with the full resolution cands:
// it bootstraps an uninitialized pool, and otherwise applies what is
// due, in the order the serving-pool section above lists.
func (p *Pool) Rerank(at time.Time, cands []Candidate) {
	t := at.UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.apply(t, cands)
}

// Project returns the membership an Apply at at with cands would commit,
// committing nothing: no membership, capacity, rotation or generation
// changes. It is the prospective membership of a preflight (the IPv4
// preflight before an IPv6 final) and, before initialization, Peek's
// temporary projection; it is bounded by k.
func (p *Pool) Project(at time.Time, cands []Candidate) []Slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.project(at.UnixNano(), cands)
}

func (p *Pool) project(t int64, cands []Candidate) []Slot {
	q := &Pool{init: p.init, gen: p.gen, epoch: p.epoch, k: p.k, slots: slices.Clone(p.slots),
		lastRerank: p.lastRerank, cursor: p.cursor, demand: p.demand, demandAt: p.demandAt}
	q.apply(t, cands)
	return q.members()
}

// Peek is the readonly view: the committed members, or before
// initialization the temporary projection of a bootstrap from cands.
func (p *Pool) Peek(at time.Time, cands []Candidate) []Slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.init {
		return p.members()
	}
	return p.project(at.UnixNano(), cands)
}

// apply is Rerank under the lock.
func (p *Pool) apply(t int64, cands []Candidate) {
	if p.init && p.quiet(t, cands) {
		return
	}
	p.commit(t, cands)
}

// commit is an Apply's full path, whatever quiet would say.
func (p *Pool) commit(t int64, cands []Candidate) {
	v, n := newPoolView(cands, p.slots)
	want := PoolSize(p.projectedLocked(t), n)
	if !p.init {
		if n == 0 {
			return
		}
		p.init = true
		p.k = want
		p.lastRerank = t
		p.layout(t, v)
		p.gen++
		return
	}
	var before [MaxPool]Key
	nb := 0
	for _, s := range p.slots {
		before[nb], nb = s.key, nb+1
	}

	p.nested(t, v)
	ceiling := PoolSize(DemandPerSlot*MaxPool, n)
	switch {
	case t-p.lastRerank >= int64(RerankEvery):
		p.lastRerank = t
		if want > p.k || want <= p.k-ShrinkBy {
			p.k = want
		}
		p.k = min(p.k, ceiling)
		p.layout(t, v)
	case want <= p.k-ShrinkBy || p.k > ceiling:
		p.k = min(want, ceiling)
		p.layout(t, v)
	}
	p.replaceMarked(t, v)
	p.fill(t, v)
	p.trade(t, v)
	p.rotate(t, v)

	if !sameKeys(before[:nb], p.slots) {
		p.gen++
	}
}

// quiet reports, without allocating, that an Apply at t with cands has
// nothing to do: no rerank due, no marked member or empty capacity with
// an eligible non-member to fill it, the rotation member neither expired
// nor the winner, no nested slot withdrawn or given a new representative
// and no shrink or ceiling cut demanded. It counts rows, not unique keys: a resolution repeating
// a key can delay a shrink to the next rerank, never cause one.
func (p *Pool) quiet(t int64, cands []Candidate) bool {
	if t-p.lastRerank >= int64(RerankEvery) {
		return false
	}
	n := len(cands)
	if want := PoolSize(p.projectedLocked(t), n); want <= p.k-ShrinkBy || p.k > PoolSize(DemandPerSlot*MaxPool, n) {
		return false
	}
	marked := len(p.slots) < p.k // capacity to refill
	for i := range p.slots {
		s := &p.slots[i]
		if s.rotation && t-s.since >= int64(RotateEvery) {
			return false
		}
		marked = marked || s.replace
		if s.key.Subgroup != "" && !sameRepresentative(s, cands) {
			return false
		}
	}
	if marked && p.freeEligible(cands) {
		return false
	}
	if last := len(p.slots) - 1; last >= 0 && p.slots[last].rotation {
		for j := range cands {
			if cands[j].Winner {
				return cands[j].Key() != p.slots[last].key
			}
		}
	}
	return true
}

// freeEligible reports whether cands hold an eligible non-member: a
// marked member's replacement or a refill. Without one the member stays
// or the capacity waits, and the Apply is quiet (a scan bounded by k per
// row, only while a member is marked or capacity is empty).
func (p *Pool) freeEligible(cands []Candidate) bool {
	for j := range cands {
		if cands[j].Eligible && p.find(cands[j].Key()) < 0 {
			return true
		}
	}
	return false
}

// sameRepresentative reports whether nested slot s's subgroup is among
// cands (its first row) with the slot's representative.
func sameRepresentative(s *slot, cands []Candidate) bool {
	for j := range cands {
		if cands[j].Subgroup == s.key.Subgroup {
			return cands[j].Node == s.node
		}
	}
	return false
}

func sameKeys(a []Key, s []slot) bool {
	if len(a) != len(s) {
		return false
	}
	for _, k := range a {
		found := false
		for i := range s {
			if s[i].key == k {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// layout commits the ranked slots from the ranking (the winner among
// them) and keeps the rotation member when it is still a non-ranked row;
// otherwise the rotation slot takes the next candidate. Members kept
// keep their failure runs and intervals.
func (p *Pool) layout(t int64, v *poolView) {
	n := len(v.rows)
	k := min(p.k, n)
	rankedN := k
	if n > k {
		rankedN = k - 1
	}
	old := p.slots
	keep := func(i int, rotation bool) slot {
		r := &v.rows[i]
		s := slot{key: r.key, node: r.Node, rotation: rotation, since: t, joined: t}
		for _, o := range old {
			if o.key == r.key {
				s.fails, s.replace, s.joined = o.fails, o.replace, o.joined
				if o.rotation == rotation {
					s.since = o.since
				}
			}
		}
		return s
	}
	chosen := make([]bool, n)
	next := make([]slot, 0, k)
	if w := v.winner(); w >= 0 && rankedN > 0 {
		chosen[w] = true
		next = append(next, keep(w, false))
	}
	for _, i := range v.order {
		if len(next) >= rankedN {
			break
		}
		if !chosen[i] {
			chosen[i] = true
			next = append(next, keep(i, false))
		}
	}
	slices.SortFunc(next, func(a, b slot) int { return cmp.Compare(v.rankOf(a.key), v.rankOf(b.key)) })
	if n > k {
		rot := -1
		for _, o := range old {
			if i, ok := v.by[o.key]; ok && o.rotation && !chosen[i] {
				rot = i
			}
		}
		if rot < 0 {
			rot = p.nextRotation(v, chosen)
		}
		if rot >= 0 {
			chosen[rot] = true
			next = append(next, keep(rot, true))
			p.cursor = v.rows[rot].decl
		}
	}
	p.slots = next
}

// nextRotation scans the view once in declaration order from after the
// cursor, wrapping, for the first row not taken: eligible preferred.
func (p *Pool) nextRotation(v *poolView, taken []bool) int {
	n := len(v.rows)
	any := -1
	for j := 1; j <= n; j++ {
		i := (p.cursor + j) % n
		if i < 0 {
			i += n
		}
		if taken[i] {
			continue
		}
		if v.rows[i].Eligible {
			return i
		}
		if any < 0 {
			any = i
		}
	}
	return any
}

// taken marks the rows that are committed members.
func (p *Pool) taken(v *poolView) []bool {
	taken := make([]bool, len(v.rows))
	for _, s := range p.slots {
		if i, ok := v.by[s.key]; ok {
			taken[i] = true
		}
	}
	return taken
}

// bestFree is the best-ranked eligible row that is not a member.
func (p *Pool) bestFree(v *poolView, taken []bool) int {
	for _, i := range v.order {
		if !taken[i] && v.rows[i].Eligible {
			return i
		}
	}
	return -1
}

// nested withdraws nested slots whose subgroup yielded no candidate and
// moves a nested slot to its subgroup's new representative in place.
func (p *Pool) nested(t int64, v *poolView) {
	out := p.slots[:0]
	for _, s := range p.slots {
		if s.key.Subgroup != "" {
			i, ok := v.by[s.key]
			if !ok {
				continue // withdrawn: fill refills it
			}
			if r := v.rows[i].Node; r != s.node {
				s.node, s.fails, s.replace = r, 0, false
				s.since, s.joined = t, t
			}
		}
		out = append(out, s)
	}
	p.slots = out
}

// replaceMarked replaces each member marked by failures or exclusion with
// the best eligible non-member, in the same slot; without one the member
// stays.
func (p *Pool) replaceMarked(t int64, v *poolView) {
	taken := p.taken(v)
	for j := range p.slots {
		s := &p.slots[j]
		if !s.replace {
			continue
		}
		i := p.bestFree(v, taken)
		if i < 0 {
			continue
		}
		taken[i] = true
		r := &v.rows[i]
		*s = slot{key: r.key, node: r.Node, rotation: s.rotation, since: t, joined: t}
		if s.rotation {
			p.cursor = r.decl
		}
	}
}

// fill refills withdrawn ranked capacity with eligible non-members,
// never beyond the committed k.
func (p *Pool) fill(t int64, v *poolView) {
	if len(p.slots) >= p.k {
		return
	}
	taken := p.taken(v)
	hasRot := len(p.slots) > 0 && p.slots[len(p.slots)-1].rotation
	for len(p.slots) < p.k {
		i := p.bestFree(v, taken)
		if i < 0 {
			return
		}
		taken[i] = true
		r := &v.rows[i]
		s := slot{key: r.key, node: r.Node, since: t, joined: t}
		if hasRot {
			p.slots = slices.Insert(p.slots, len(p.slots)-1, s)
		} else {
			p.slots = append(p.slots, s)
		}
	}
}

// trade moves a rotation member that is the Apply's ordinary winner into
// the ranked slots; the lowest-ranked ranked member takes the rotation
// slot with a fresh interval.
func (p *Pool) trade(t int64, v *poolView) {
	w := v.winner()
	last := len(p.slots) - 1
	if w < 0 || last < 1 || !p.slots[last].rotation || p.slots[last].key != v.rows[w].key {
		return
	}
	low := 0
	for j := 1; j < last; j++ {
		if v.rankOf(p.slots[j].key) >= v.rankOf(p.slots[low].key) {
			low = j
		}
	}
	win, dis := p.slots[last], p.slots[low]
	win.rotation = false
	dis.rotation, dis.since = true, t
	p.slots = slices.Delete(p.slots, low, low+1)
	p.slots[len(p.slots)-1] = win
	p.slots = append(p.slots, dis)
	if i, ok := v.by[dis.key]; ok {
		p.cursor = v.rows[i].decl
	}
}

// rotate advances the rotation slot once its member held it RotateEvery.
func (p *Pool) rotate(t int64, v *poolView) {
	last := len(p.slots) - 1
	if last < 0 || !p.slots[last].rotation || t-p.slots[last].since < int64(RotateEvery) {
		return
	}
	i := p.nextRotation(v, p.taken(v))
	if i < 0 {
		p.slots[last].since = t // nobody to rotate in: another interval
		return
	}
	r := &v.rows[i]
	p.slots[last] = slot{key: r.key, node: r.Node, rotation: true, since: t, joined: t}
	p.cursor = r.decl
}

// due reports whether an Apply at at with cands would do more than the
// quiet scan: the rank must then evaluate every candidate.
// It also returns the rotation member's key (ok false without one): an
// Apply whose winner is that member is due too.
func (p *Pool) due(at time.Time, cands []Candidate) (due bool, rotation Key, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if last := len(p.slots) - 1; last >= 0 && p.slots[last].rotation {
		rotation, ok = p.slots[last].key, true
	}
	return !p.init || !p.quiet(at.UnixNano(), cands), rotation, ok
}
