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

// Choose is the leaf of q through the group (plane.Chooser).
// Retry is the Manager's Retry for a flow routed to this group.
func (c *chooser) Retry(q *plane.Query, failed *plane.Target) []*plane.Target {
	return c.m.Retry(q, failed)
}

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
		nw := m.rank(w, g, net, fam, win, nil, nil)
		c.prev.Store(win)
		c.win.Store(nw)
		c.gen.Store(gen)
		c.epoch.Store(e)
		c.computed.Store(true)
		c.busy.Store(false)
		if nw != win && nw >= 0 && win >= 0 {
			m.interrupt(g, win, net)
		}
		win, valid = nw, true
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

// cand is one ranked candidate: strikes first, then measured before
// unmeasured, then the lower average, then declaration order.
type cand struct {
	i        int32
	struck   bool
	measured bool
	lat      time.Duration
}

func (a cand) before(b cand) bool {
	switch {
	case b.i < 0:
		return true
	case a.struck != b.struck:
		return !a.struck
	case a.measured != b.measured:
		return a.measured
	}
	return a.measured && a.lat < b.lat
}

// ranking is what a rank saw, for Explain.
type ranking struct {
	best, inc   cand
	incIdx      int32 // the incumbent ranked against
	incEligible bool
	incStrikes  int
	mirror      bool // UDP ranked by the TCP averages
	held        bool // the incumbent stayed within tolerance
	eligible    int
}

// rank is the URLTest winner of g for (network, family) against the
// incumbent inc: the best candidate, unless the incumbent is eligible,
// carries no strikes, is measured and its current average is within the
// tolerance of the best's. rows and out, when not nil, receive what
// Explain shows.
func (m *Manager) rank(w *walker, g *grp, net, fam int, inc int32, rows *[]Candidate, out *ranking) int32 {
	p, r := w.quiet()
	defer w.loud(p, r)
	var bt, bu, it, iu cand
	bt.i, bu.i, it.i, iu.i = none, none, none, none
	rk := ranking{incIdx: inc}
	evidence := false
	var tcpRows []cand
	for i := range g.members {
		mi := int32(i)
		_, li, x := m.member(w, g, mi, net, fam)
		if x != exOK || li == none {
			if rows != nil {
				*rows = append(*rows, m.candidate(g, mi, li, x, fam))
				tcpRows = append(tcpRows, cand{i: none})
			}
			continue
		}
		rk.eligible++
		s := m.strikes(li)
		ct := cand{i: mi, struck: s > 0}
		ct.lat, ct.measured = m.tcpLatency(g, mi, li, fam)
		cu := ct
		if net == udp {
			cu.lat, cu.measured = m.udpLatency(li, fam)
			evidence = evidence || cu.measured
		}
		if ct.before(bt) {
			bt = ct
		}
		if cu.before(bu) {
			bu = cu
		}
		if mi == inc {
			it, iu, rk.incEligible, rk.incStrikes = ct, cu, true, s
		}
		if rows != nil {
			row := m.candidate(g, mi, li, exOK, fam)
			row.Strikes, row.Latency, row.Measured = s, cu.lat, cu.measured
			*rows = append(*rows, row)
			tcpRows = append(tcpRows, ct)
		}
	}
	best, in := bt, it
	if net == udp && evidence {
		best, in = bu, iu
	} else if net == udp {
		rk.mirror = true
		if rows != nil {
			for j := range *rows {
				if tcpRows[j].i >= 0 {
					(*rows)[j].Latency, (*rows)[j].Measured = tcpRows[j].lat, tcpRows[j].measured
				}
			}
		}
	}
	rk.best, rk.inc = best, in
	win := best.i
	if inc >= 0 && inc != best.i && rk.incEligible && rk.incStrikes == 0 && in.measured && best.measured && best.lat+g.tol >= in.lat {
		win, rk.held = inc, true
	}
	if out != nil {
		*out = rk
	}
	return win
}

func (m *Manager) strikes(li int32) int {
	if li < 0 || m.leaves[li].Block {
		return 0
	}
	return m.h.Strikes(m.leaves[li].Node)
}

// tcpLatency is the TCP ranking average of member mi: the group's
// (member, check_url) average when it has a check_url, else the TCP
// average of the member's current leaf.
func (m *Manager) tcpLatency(g *grp, mi, li int32, fam int) (time.Duration, bool) {
	if g.url != "" {
		return m.h.URLLatency(g.members[mi].tag, g.url)
	}
	if li < 0 || m.leaves[li].Block {
		return 0, false
	}
	return m.h.Latency(m.leaves[li].Node, health.TCP, netx.Family(fam))
}

// udpLatency is the UDP ranking average of a leaf: DataUDP, then DNSUDP.
func (m *Manager) udpLatency(li int32, fam int) (time.Duration, bool) {
	if li < 0 || m.leaves[li].Block {
		return 0, false
	}
	n := m.leaves[li].Node
	if d, ok := m.h.Latency(n, health.DataUDP, netx.Family(fam)); ok {
		return d, true
	}
	return m.h.Latency(n, health.DNSUDP, netx.Family(fam))
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
