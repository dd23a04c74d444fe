package group

import (
	"time"

	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
)

// MemberLeaf is one member of a group and the leaf it currently reaches.
type MemberLeaf struct {
	Member string        // the member's tag (an outbound's or a sub-group's)
	Leaf   string        // the leaf's tag
	Node   health.NodeID // the leaf's node
	Target *plane.Target // the leaf's target
}

// URLCheck is one group's check_url probing: its members with their
// current leaves, resolved again for every cycle.
type URLCheck struct {
	Group   string
	URL     string
	Members []MemberLeaf
}

// Activity is what health needs to schedule a group's probing.
type Activity struct {
	Group string
	// Sleeps: the group's probing sleeps after IdleTimeout without a real
	// selection (URLTest); Health.Selected wakes it.
	Sleeps      bool
	IdleTimeout time.Duration // 0: the health layer's default
	// Nodes are the nodes of every leaf the group reaches, finals
	// included.
	Nodes []health.NodeID
}

// Info is one group for the API.
type Info struct {
	Tag      string
	Policy   string
	Identity Identity
	Members  []string
	// Now is the current pick per network (indexed by netx.Network) over
	// IPv4: a Selector's effective choice (whatever its health), a
	// URLTest's winner, a Fallback's pin, a LoadBalance's next member; ""
	// when there is none.
	Now [2]string
	// Chosen is a Selector's runtime choice per network, "" when unset.
	Chosen    [2]string
	Interrupt bool
	Final     string
}

func (m *Manager) group(tag string) *grp {
	if i, ok := m.byTag[tag]; ok {
		return &m.groups[i]
	}
	return nil
}

// NodeNames are the group's direct member tags (outbounds, balancers and
// sub-groups) in order; nil for an unknown group.
func (m *Manager) NodeNames(group string) []string {
	g := m.group(group)
	if g == nil {
		return nil
	}
	out := make([]string, len(g.members))
	for i := range g.members {
		out[i] = g.members[i].tag
	}
	return out
}

// LeafNodeNames are the real leaves reachable below the group through its
// members (finals excluded, cut edges not followed), deduplicated, in
// walk order. A balancer, whose leaves are its own, is listed by its tag.
func (m *Manager) LeafNodeNames(group string) []string {
	gi, ok := m.byTag[group]
	if !ok {
		return nil
	}
	var out []string
	seen := make(map[string]bool)
	visited := make([]bool, len(m.groups))
	var visit func(i int32)
	visit = func(i int32) {
		if visited[i] {
			return
		}
		visited[i] = true
		g := &m.groups[i]
		for j := range g.members {
			e := &g.members[j]
			switch {
			case e.cut:
			case e.kind == kindGroup:
				visit(e.idx)
			case !seen[e.tag]:
				seen[e.tag] = true
				out = append(out, e.tag)
			}
		}
	}
	visit(gi)
	return out
}

// peeker is a walk that changes nothing a real selection would (no
// Health.Selected, no round-robin move, no balancer asked) over a query of
// its own.
func (m *Manager) peeker(q *plane.Query, gi int32, net netx.Network, f netx.Family) walker {
	q.Network, q.Family = net, f
	q.Depth = 0
	q.Push(m.groups[gi].tag)
	w := walker{q: q, peek: true, rec: true}
	w.stack[0], w.n = gi, 1
	return w
}

// DelayTestMembers is one (member tag, current leaf) pair per member of
// the group that reaches a known leaf over TCP and IPv4: an outbound
// member is its own leaf whatever its health; a sub-group is resolved
// through its own policy now. Cut members and balancers (which probe
// their own members) are left out.
func (m *Manager) DelayTestMembers(group string) []MemberLeaf {
	gi, ok := m.byTag[group]
	if !ok {
		return nil
	}
	g := &m.groups[gi]
	var out []MemberLeaf
	var q plane.Query
	for j := range g.members {
		e := &g.members[j]
		li := none
		switch {
		case e.cut || e.kind == kindBalancer:
			continue
		case e.kind == kindLeaf:
			li = e.idx
		default:
			w := m.peeker(&q, gi, netx.TCP, netx.V4)
			w.rec = false
			_, li, _ = m.follow(&w, e, tcp, v4, false)
		}
		if li >= 0 {
			l := &m.leaves[li]
			out = append(out, MemberLeaf{Member: e.tag, Leaf: l.Tag, Node: l.Node, Target: l.Target})
		}
	}
	return out
}

// SelectionChain is the group's current chain for network over IPv4:
// the group, each selected sub-group (or final) and the leaf; it ends at a
// balancer's tag when a balancer picks the leaf. nil when the group
// refuses the flow.
func (m *Manager) SelectionChain(group string, network netx.Network) []string {
	gi, ok := m.byTag[group]
	if !ok || network > netx.UDP {
		return nil
	}
	var q plane.Query
	w := m.peeker(&q, gi, network, netx.V4)
	t, li := m.resolve(&w, gi, int(network), v4, true)
	if li == none {
		return nil
	}
	if t == nil && li >= 0 {
		t = m.leaves[li].Target
	}
	if t != nil && q.Chain[q.Depth-1] != t.ID().Tag {
		q.Push(t.ID().Tag)
	}
	return q.Path()
}

// URLChecks are the (group, check_url, members with their current leaf)
// registrations of every group with a check_url, for health's per-group
// probing. A Selector has none: it ignores check_url.
func (m *Manager) URLChecks() []URLCheck {
	var out []URLCheck
	for i := range m.groups {
		g := &m.groups[i]
		if g.url == "" {
			continue
		}
		out = append(out, URLCheck{Group: g.tag, URL: g.url, Members: m.DelayTestMembers(g.tag)})
	}
	return out
}

// Activity is, per group, what schedules its probing.
func (m *Manager) Activity() []Activity {
	out := make([]Activity, len(m.groups))
	for i := range m.groups {
		g := &m.groups[i]
		a := Activity{Group: g.tag, Sleeps: g.pol == urltest || g.pol == scoring, IdleTimeout: g.idle}
		seen := make(map[health.NodeID]bool, len(g.closure))
		for _, li := range g.closure {
			n := m.leaves[li].Node
			if n.IsZero() || seen[n] {
				continue
			}
			seen[n] = true
			a.Nodes = append(a.Nodes, n)
		}
		out[i] = a
	}
	return out
}

// Groups describes every group for the API, in configuration order.
func (m *Manager) Groups() []Info {
	out := make([]Info, len(m.groups))
	var q plane.Query
	for i := range m.groups {
		g := &m.groups[i]
		in := Info{Tag: g.tag, Policy: g.pol.String(), Identity: g.id, Interrupt: g.interr, Members: m.NodeNames(g.tag)}
		if g.hasFinal {
			in.Final = g.final.tag
		}
		for n := range 2 {
			if g.pol == selector {
				if c := g.effective(n); c >= 0 {
					in.Now[n] = g.members[c].tag
				}
				if c := g.choice[n].Load(); c >= 0 {
					in.Chosen[n] = g.members[c].tag
				}
				continue
			}
			w := m.peeker(&q, int32(i), netx.Network(n), netx.V4)
			w.rec = false
			if _, li, mi := m.pick(&w, g, n, v4); li != none {
				in.Now[n] = g.members[mi].tag
			}
		}
		out[i] = in
	}
	return out
}
