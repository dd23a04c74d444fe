package group

// The policies' picks: the first eligible member, Fallback's pin,
// LoadBalance's cursors and URLTest's winner (ranked in rank.go).

import (
	"switchyard/plane"
)

// first is the first eligible member in declaration order.
func (m *Manager) first(w *walker, g *grp, net, fam int) (*plane.Target, int32, int32) {
	for i := range g.members {
		if t, li, _ := m.member(w, g, int32(i), net, fam); li != none {
			return t, li, int32(i)
		}
	}
	return nil, none, none
}

// fallback keeps the pin while its member is eligible; otherwise it pins
// the first eligible member in declaration order.
func (m *Manager) fallback(w *walker, g *grp, net, fam int) (*plane.Target, int32, int32) {
	p := &g.pins[net][fam]
	cur := p.idx.Load()
	if cur >= 0 {
		if t, li, _ := m.member(w, g, cur, net, fam); li != none {
			return t, li, cur
		}
	}
	for i := range g.members {
		mi := int32(i)
		if mi == cur {
			continue
		}
		t, li, _ := m.member(w, g, mi, net, fam)
		if li == none {
			continue
		}
		if p.idx.CompareAndSwap(cur, mi) {
			p.since.Store(m.now().UnixNano())
			if cur >= 0 {
				m.switched(g, net, SwitchUnavailable)
				m.interrupt(g, cur, net)
			}
		}
		return t, li, mi
	}
	return nil, none, none
}

// loadbalance is round robin over the eligible members in declaration
// order; for UDP a member still carrying the association's leaf (Prefer)
// is kept.
func (m *Manager) loadbalance(w *walker, g *grp, net, fam int) (*plane.Target, int32, int32) {
	if net == udp && w.q.Prefer != nil {
		if t, li, mi := m.preferred(w, g, fam); li != none {
			return t, li, mi
		}
	}
	n := int32(len(g.members))
	p, r := w.quiet()
	count := 0
	for i := range n {
		if _, li, _ := m.member(w, g, i, net, fam); li != none {
			count++
		}
	}
	w.loud(p, r)
	if count == 0 {
		return nil, none, none
	}
	var k uint64
	if w.peek {
		k = g.cursor[net].Load()
	} else {
		k = g.cursor[net].Add(1) - 1
	}
	skip := int(k % uint64(count))
	for i := range n {
		if skip > 0 {
			p, r := w.quiet()
			_, li, _ := m.member(w, g, i, net, fam)
			w.loud(p, r)
			if li != none {
				skip--
			}
			continue
		}
		if t, li, _ := m.member(w, g, i, net, fam); li != none {
			return t, li, i
		}
	}
	return m.first(w, g, net, fam)
}

// preferred is the UDP member whose leaf is the association's, if it is
// still eligible.
func (m *Manager) preferred(w *walker, g *grp, fam int) (*plane.Target, int32, int32) {
	want := *w.q.Prefer
	for i := range g.members {
		mi := int32(i)
		e := &g.members[mi]
		switch e.kind {
		case kindLeaf:
			if m.leaves[e.idx].Target.ID() != want {
				continue
			}
		case kindGroup:
			p, r := w.quiet()
			_, li, _ := m.member(w, g, mi, udp, fam)
			w.loud(p, r)
			if li < 0 || m.leaves[li].Target.ID() != want {
				continue
			}
		default:
			continue
		}
		t, li, _ := m.member(w, g, mi, udp, fam)
		if li != none {
			return t, li, mi
		}
		return nil, none, none
	}
	return nil, none, none
}

// urltest serves the cached winner of (network, family) while the health
// epoch and the Manager's generation it was ranked at hold; otherwise one
// selector re-ranks (single flight) and the others use the cached value.
func (m *Manager) urltest(w *walker, g *grp, net, fam int) (*plane.Target, int32, int32) {
	c := &g.cache[net][fam]
	e, gen := m.h.Epoch(), m.gen.Load()
	// The stamps before the winner: a recompute stores the winner first,
	// so a winner read after matching stamps is at least that recent.
	valid := c.computed.Load()
	fresh := valid && c.epoch.Load() == e && c.gen.Load() == gen
	win := c.win.Load()
	if !fresh && c.busy.CompareAndSwap(false, true) {
		var rk ranking
		nw := m.rank(w, g, net, fam, win, nil, &rk)
		c.prev.Store(win)
		c.cold.Store(!rk.measured)
		c.win.Store(nw)
		c.gen.Store(gen)
		c.epoch.Store(e)
		c.computed.Store(true)
		c.busy.Store(false)
		if nw != win && nw >= 0 && win >= 0 {
			m.switched(g, net, switchReason(&rk))
			m.interrupt(g, win, net)
		}
		win, valid = nw, true
	}
	if net == udp && w.n == 1 && w.q.Prefer != nil && c.cold.Load() {
		// A cold top-level group keeps the leaf its UDP preparation
		// chose for the association while that leaf stays eligible.
		if t, li, mi := m.preferred(w, g, fam); li != none {
			return t, li, mi
		}
	}
	if win >= 0 {
		if t, li, _ := m.member(w, g, win, net, fam); li != none {
			return t, li, win
		}
	} else if valid {
		return nil, none, none
	}
	// A winner ranked at an older state that is no longer eligible, or
	// none ranked yet while another selector ranks: the first eligible.
	return m.first(w, g, net, fam)
}
