package group

// Cold URLTest UDP preparation: the candidates a top-level URLTest group
// with no usable measurement names for a UDP flow, and the recheck of the
// winner's eligibility (plane.ColdPreparer).

import (
	"slices"

	"switchyard/netx"
	"switchyard/plane"
)

var _ plane.ColdPreparer = (*chooser)(nil)

// ColdCandidates is, for a UDP flow routed to a URLTest group, every
// eligible member's leaf in the group's ranking order (members carrying
// strikes last, otherwise declaration order), each leaf once, when no
// eligible member has real ranking evidence for q's family in DataUdp,
// DnsUdp or TCP (the group's check_url average when it has one).
// Synthetic dial-failure placeholders are no evidence. nil otherwise: the
// group's pick is authoritative (a measured group, another policy, a
// single candidate). The plane asks only the route target's chooser, so a
// URLTest nested under another group never prepares this way.
func (c *chooser) ColdCandidates(q *plane.Query) []plane.Candidate {
	m := c.m
	g := &m.groups[c.g]
	if g.pol != urltest || q.Network != netx.UDP || q.Family > netx.V6 {
		return nil
	}
	fam := int(q.Family)
	lq := plane.Query{Network: q.Network, Family: q.Family, Dst: q.Dst}
	w := walker{q: &lq}
	w.stack[0], w.n = c.g, 1
	order, measured := m.coldOrder(&w, g, fam)
	if measured || len(order) < 2 {
		return nil
	}
	out := make([]plane.Candidate, 0, len(order))
	for _, mi := range order {
		lq.Depth = 0
		lq.Push(g.tag)
		w.rec = true
		t, _, _ := m.member(&w, g, mi, udp, fam)
		if t == nil || slices.ContainsFunc(out, func(c plane.Candidate) bool { return c.Leaf == t }) {
			continue
		}
		if lq.Chain[lq.Depth-1] != t.ID().Tag {
			lq.Push(t.ID().Tag)
		}
		out = append(out, plane.Candidate{Leaf: t, Chain: lq.Path()})
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// coldOrder is the ranking order of g's eligible UDP members when none is
// measured: those without strikes first, each part in declaration order.
// measured is set, and the order nil, as soon as an eligible member has
// ranking evidence. A block member is a terminal action, not a transport
// to race: it is left out, and when it is the group's first pick the
// order is nil (that pick stands).
func (m *Manager) coldOrder(w *walker, g *grp, fam int) (order []int32, measured bool) {
	p, r := w.quiet()
	defer w.loud(p, r)
	var struck []int32
	blockFirst := false
	for i := range g.members {
		mi := int32(i)
		_, li, x := m.member(w, g, mi, udp, fam)
		if x != exOK || li == none {
			continue
		}
		if _, ok := m.udpLatency(li, fam); ok {
			return nil, true
		}
		if _, ok := m.tcpLatency(g, mi, li, fam); ok {
			return nil, true
		}
		switch {
		case li >= 0 && m.leaves[li].Block:
			blockFirst = blockFirst || len(order) == 0
		case m.strikes(li) > 0:
			struck = append(struck, mi)
		default:
			order = append(order, mi)
		}
	}
	if blockFirst {
		return nil, false
	}
	return append(order, struck...), false
}

// ColdEligible reports whether leaf is still an eligible UDP candidate of
// the group for q's family: an eligible member reaches it now, or it is
// behind an eligible balancer member and passes the liveness filter.
func (c *chooser) ColdEligible(q *plane.Query, leaf *plane.Target) bool {
	m := c.m
	g := &m.groups[c.g]
	if q.Family > netx.V6 || leaf == nil {
		return false
	}
	fam := int(q.Family)
	lq := plane.Query{Network: netx.UDP, Family: q.Family, Dst: q.Dst}
	w := walker{q: &lq, peek: true}
	w.stack[0], w.n = c.g, 1
	for i := range g.members {
		_, li, x := m.member(&w, g, int32(i), udp, fam)
		switch {
		case x != exOK:
		case li >= 0 && m.leaves[li].Target == leaf:
			return true
		case li == opaque && m.leafEligible(leaf, fam):
			return true
		}
	}
	return false
}

// leafEligible passes the leaf that target is through the UDP liveness
// filter.
func (m *Manager) leafEligible(t *plane.Target, fam int) bool {
	for i := range m.leaves {
		if l := &m.leaves[i]; l.Target == t {
			return m.filter(l, udp, fam) == exOK
		}
	}
	return false
}
