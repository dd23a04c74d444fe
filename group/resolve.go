package group

import (
	"time"

	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
)

// Network and family indices of the per-network and per-family tables.
const (
	tcp = int(netx.TCP)
	udp = int(netx.UDP)
	v4  = int(netx.V4)
	v6  = int(netx.V6)
)

// LastResortWarnEvery is how often, at most, a group logs that it serves
// its only leaf although TCP health marks it dead.
const LastResortWarnEvery = 60 * time.Second

// excl is why a member yields no candidate (0: it does).
type excl uint8

const (
	exOK      excl = iota
	exDead         // TCP liveness
	exNoUDP        // the leaf cannot carry UDP
	exUDPDead      // not UDP-eligible
	exURL          // the group's check_url probe of the member fails
	exCut          // the edge closes a cycle
	exDepth        // deeper than plane.MaxGroupDepth
	exCycle        // already on this walk
	exNoPick       // a sub-group (or balancer) yields no leaf
)

// walker is one walk's state: the query it records the chain in and the
// groups it is inside, a fixed array so a walk allocates nothing.
type walker struct {
	q *plane.Query
	// peek: no side effect a real selection has (Health.Selected, a round
	// robin cursor's move, asking a balancer).
	peek bool
	// rec: record the chain in q.
	rec   bool
	n     int
	stack [plane.MaxGroupDepth]int32
}

func (w *walker) enter(g int32) excl {
	for _, s := range w.stack[:w.n] {
		if s == g {
			return exCycle
		}
	}
	if w.n >= len(w.stack) {
		return exDepth
	}
	w.stack[w.n] = g
	w.n++
	return exOK
}

// quiet switches w to peeking without recording, for ranking and counting
// the members of a group; the returned state is given back to loud.
func (w *walker) quiet() (bool, bool) {
	p, r := w.peek, w.rec
	w.peek, w.rec = true, false
	return p, r
}

func (w *walker) loud(p, r bool) { w.peek, w.rec = p, r }

// Retry is the Manager's Retry for a flow routed to this group.
func (c *chooser) Retry(q *plane.Query, failed *plane.Target) []*plane.Target {
	return c.m.Retry(q, failed)
}

// Choose is the leaf of q through the group (plane.Chooser).
func (c *chooser) Choose(q *plane.Query) *plane.Target {
	if q.Network > netx.UDP || q.Family > netx.V6 {
		return nil
	}
	var w walker
	w.q, w.rec = q, true
	w.stack[0], w.n = c.g, 1
	t, _ := c.m.resolve(&w, c.g, int(q.Network), int(q.Family), true)
	return t
}

// resolve is the leaf of group gi, which w has entered: its policy's pick;
// for IPv6 then the pick over IPv4 paths; then its final; then, for a walk's
// own group and TCP, the last resort. top is false for a sub-group asked
// for its member's candidate: a dead only leaf is no candidate of a parent.
func (m *Manager) resolve(w *walker, gi int32, net, fam int, top bool) (*plane.Target, int32) {
	g := &m.groups[gi]
	if !w.peek {
		m.h.Selected(g.tag)
	}
	if t, li, _ := m.pick(w, g, net, fam); li != none {
		return t, li
	}
	if fam == v6 {
		if t, li, _ := m.pick(w, g, net, v4); li != none {
			return t, li
		}
	}
	if g.hasFinal {
		if !g.finalOK {
			return nil, none
		}
		t, li, _ := m.follow(w, &g.final, net, fam, top)
		return t, li
	}
	if top && net == tcp {
		return m.lastResort(w, g, fam)
	}
	return nil, none
}

// pick is the policy's choice among g's members: the target (nil when
// peeking behind a balancer), the leaf index (none: no pick) and the
// member index.
func (m *Manager) pick(w *walker, g *grp, net, fam int) (*plane.Target, int32, int32) {
	switch g.pol {
	case selector:
		mi := g.effective(net)
		if mi < 0 {
			return nil, none, none
		}
		t, li, _ := m.member(w, g, mi, net, fam)
		return t, li, mi
	case urltest:
		return m.urltest(w, g, net, fam)
	case fallback:
		return m.fallback(w, g, net, fam)
	case scoring:
		return m.scorePick(w, g, net, fam)
	}
	return m.loadbalance(w, g, net, fam)
}

// effective is the Selector's member for net: the runtime choice, then the
// default, then the first member.
func (g *grp) effective(net int) int32 {
	if c := g.choice[net].Load(); c >= 0 {
		return c
	}
	return g.def
}

// member is member mi's candidate through the liveness filter: for a leaf
// itself, for a sub-group the leaf its own policy picks, for a balancer
// the leaf it picks.
func (m *Manager) member(w *walker, g *grp, mi int32, net, fam int) (*plane.Target, int32, excl) {
	e := &g.members[mi]
	if e.cut {
		return nil, none, exCut
	}
	gate := net == tcp && g.url != ""
	if e.kind == kindLeaf {
		l := &m.leaves[e.idx]
		if x := m.filter(l, net, fam); x != exOK {
			return nil, none, x
		}
		if gate && !l.Block && !m.h.URLAlive(e.tag, g.url) {
			return nil, none, exURL
		}
		return l.Target, e.idx, exOK
	}
	if gate && !m.h.URLAlive(e.tag, g.url) {
		return nil, none, exURL
	}
	return m.follow(w, e, net, fam, false)
}

// filter is the liveness filter of one leaf for a network and family.
func (m *Manager) filter(l *Leaf, net, fam int) excl {
	switch {
	case l.Block:
	case net == tcp:
		if !m.h.Alive(l.Node, health.TCP, netx.Family(fam)) {
			return exDead
		}
	case !l.UDP:
		return exNoUDP
	case !m.h.UDPEligible(l.Node, netx.Family(fam)):
		return exUDPDead
	}
	return exOK
}

// follow resolves an edge without filtering a leaf: a final, or a member
// past its filter.
func (m *Manager) follow(w *walker, e *edge, net, fam int, top bool) (*plane.Target, int32, excl) {
	switch {
	case e.cut:
		return nil, none, exCut
	case e.kind == kindLeaf:
		return m.leaves[e.idx].Target, e.idx, exOK
	case e.kind == kindBalancer:
		return m.balance(w, e)
	}
	if x := w.enter(e.idx); x != exOK {
		return nil, none, x
	}
	d := w.q.Depth
	if w.rec && !w.q.Push(e.tag) {
		w.n--
		return nil, none, exDepth
	}
	t, li := m.resolve(w, e.idx, net, fam, top)
	w.n--
	if li == none {
		w.q.Depth = d
		return nil, none, exNoPick
	}
	return t, li, exOK
}

// balance asks a balancer member for its leaf. Resolve records its own
// chain in q, so the walk's chain is put back and the balancer's tag
// pushed. A peek does not ask (it would move the balancer's round robin):
// the member is eligible, its leaf unknown.
func (m *Manager) balance(w *walker, e *edge) (*plane.Target, int32, excl) {
	q := w.q
	if w.peek {
		if w.rec {
			q.Push(e.tag)
		}
		return nil, opaque, exOK
	}
	saved, d := q.Chain, q.Depth
	t := e.bal.Resolve(q)
	q.Chain, q.Depth = saved, d
	if t == nil {
		return nil, none, exNoPick
	}
	if w.rec && !q.Push(e.tag) {
		return nil, none, exDepth
	}
	return t, opaque, exOK
}

// lastResort serves, for TCP, the group's only leaf through the current
// Selector choices when TCP liveness is what excludes it. The chain is the
// walk to it through those choices.
func (m *Manager) lastResort(w *walker, g *grp, fam int) (*plane.Target, int32) {
	s := g.sole.Load()
	if s < 0 {
		return nil, none
	}
	l := &m.leaves[s]
	if l.Block || m.h.Alive(l.Node, health.TCP, netx.Family(fam)) ||
		fam == v6 && m.h.Alive(l.Node, health.TCP, netx.V4) {
		return nil, none
	}
	if w.rec && !m.descend(w, g, s) {
		return nil, none
	}
	if !w.peek {
		m.warnLastResort(g, l)
		if g.pol == scoring {
			m.scoreLastResort(w, g, s)
		}
	}
	return l.Target, s
}

// descend records the chain from g to its only leaf s.
func (m *Manager) descend(w *walker, g *grp, s int32) bool {
	n, d := w.n, w.q.Depth
	for {
		var e *edge
		if g.pol == selector {
			if c := g.effective(tcp); c >= 0 && m.holds(&g.members[c], s) {
				e = &g.members[c]
			}
		} else {
			for j := range g.members {
				if m.holds(&g.members[j], s) {
					e = &g.members[j]
					break
				}
			}
		}
		if e == nil && g.finalOK && m.holds(&g.final, s) {
			e = &g.final
		}
		if e == nil || e.kind == kindGroup && (w.enter(e.idx) != exOK || !w.q.Push(e.tag)) {
			w.n, w.q.Depth = n, d
			return false
		}
		if e.kind == kindLeaf {
			w.n = n
			return true
		}
		g = &m.groups[e.idx]
		if !w.peek {
			m.h.Selected(g.tag)
		}
	}
}

// holds reports whether e reaches exactly the leaf s.
func (m *Manager) holds(e *edge, s int32) bool {
	switch {
	case e.cut:
		return false
	case e.kind == kindLeaf:
		return e.idx == s
	case e.kind == kindGroup:
		return m.groups[e.idx].sole.Load() == s
	}
	return false
}

func (m *Manager) warnLastResort(g *grp, l *Leaf) {
	now := m.now().UnixNano()
	last := g.warned.Load()
	if last != 0 && now-last < int64(LastResortWarnEvery) {
		return
	}
	if g.warned.CompareAndSwap(last, now) {
		m.log.Warn("serving the group's only leaf although TCP health marks it dead (last resort)", "group", g.tag, "leaf", l.Tag)
	}
}

// interrupt hands the interruption of g's old member on net to the worker.
func (m *Manager) interrupt(g *grp, old int32, net int) {
	if g.interr && m.work != nil {
		m.work.send(job{g: g.idx, member: old, net: netx.Network(net)})
	}
}
