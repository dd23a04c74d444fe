package group

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"switchyard/health"
	"switchyard/plane"
	"switchyard/spec"
)

type builder struct {
	m         *Manager
	leaves    map[string]Leaf
	balancers map[string]*plane.Target
	ids       map[string]Identity
	leafIdx   map[string]int32
	warnings  []string
}

func (b *builder) warn(format string, args ...any) {
	b.warnings = append(b.warnings, fmt.Sprintf(format, args...))
}

func (b *builder) build(groups []spec.Group) error {
	m := b.m
	m.byTag = make(map[string]int32, len(groups))
	for i, g := range groups {
		if _, dup := m.byTag[g.Tag]; dup {
			return fmt.Errorf("group %q is defined twice", g.Tag)
		}
		if _, ok := b.leaves[g.Tag]; ok {
			return fmt.Errorf("tag %q names both an outbound and a group", g.Tag)
		}
		if _, ok := b.balancers[g.Tag]; ok {
			return fmt.Errorf("tag %q names both a balancer and a group", g.Tag)
		}
		m.byTag[g.Tag] = int32(i)
	}
	// Leaves in a stable order: the order groups first reach them.
	b.leafIdx = make(map[string]int32)
	m.groups = make([]grp, len(groups))
	for i, sg := range groups {
		g := &m.groups[i]
		g.idx, g.tag = int32(i), sg.Tag
		switch sg.Policy {
		case "selector":
			g.pol = selector
		case "urltest":
			g.pol = urltest
		case "fallback":
			g.pol = fallback
		case "loadbalance":
			g.pol = loadbalance
		case "score":
			g.pol = scoring
		default:
			return fmt.Errorf("group %q: unknown policy %q", sg.Tag, sg.Policy)
		}
		if id, ok := b.ids[sg.Tag]; ok {
			g.id = id
		} else {
			g.id = freshIdentity(m.now())
		}
		g.interr = sg.Interrupt
		g.tol = max(sg.Tolerance, time.Millisecond)
		g.idle = sg.IdleTimeout
		g.url = sg.CheckURL
		if g.pol == selector && sg.CheckURL != "" {
			b.warn("group %q: selector ignores check_url", sg.Tag)
			g.url = ""
		}
		g.members = make([]edge, len(sg.Members))
		for j, tag := range sg.Members {
			e, ok := b.edge(tag)
			if !ok {
				return fmt.Errorf("group %q: member %q names no outbound, balancer or group", sg.Tag, tag)
			}
			if g.pol == scoring && e.kind == kindBalancer {
				return fmt.Errorf("group %q: member %q is a balancer: a score group ranks leaves it can name, and a balancer picks its own; list the balancer's outbounds instead", sg.Tag, tag)
			}
			g.members[j] = e
		}
		g.def = none
		if len(g.members) > 0 {
			g.def = 0
		}
		if sg.Default != "" {
			if j := g.memberIndex(sg.Default); j >= 0 {
				g.def, g.hasDef = j, true
			} else {
				b.warn("group %q: default %q is not a member; the first member is the default", sg.Tag, sg.Default)
			}
		}
		if sg.Final != "" {
			g.hasFinal = true
			e, ok := b.edge(sg.Final)
			if ok {
				g.final, g.finalOK = e, true
			} else {
				g.final = edge{tag: sg.Final}
				b.warn("group %q: final %q names no outbound, balancer or group; flows with no eligible member are refused", sg.Tag, sg.Final)
			}
		}
		for n := range g.choice {
			g.choice[n].Store(none)
			for f := range g.cache[n] {
				g.cache[n][f].win.Store(none)
				g.cache[n][f].prev.Store(none)
				g.pins[n][f].idx.Store(none)
			}
		}
		g.warned.Store(0)
	}
	b.cutCycles()
	b.checkDepth()
	m.closures()
	m.soles()
	return nil
}

// edge resolves a member or final tag.
func (b *builder) edge(tag string) (edge, bool) {
	if i, ok := b.m.byTag[tag]; ok {
		return edge{tag: tag, kind: kindGroup, idx: i}, true
	}
	if t, ok := b.balancers[tag]; ok && t != nil {
		if _, dup := b.leaves[tag]; dup {
			return edge{}, false
		}
		return edge{tag: tag, kind: kindBalancer, bal: t}, true
	}
	l, ok := b.leaves[tag]
	if !ok || l.Target == nil {
		return edge{}, false
	}
	i, ok := b.leafIdx[tag]
	if !ok {
		i = int32(len(b.m.leaves))
		if l.Tag == "" {
			l.Tag = tag
		}
		b.m.leaves = append(b.m.leaves, l)
		b.leafIdx[tag] = i
	}
	return edge{tag: tag, kind: kindLeaf, idx: i}, true
}

func (g *grp) memberIndex(tag string) int32 {
	for j := range g.members {
		if g.members[j].tag == tag {
			return int32(j)
		}
	}
	return none
}

// edges calls fn for every member and then the final of g.
func (g *grp) edges(fn func(e *edge, final bool)) {
	for j := range g.members {
		fn(&g.members[j], false)
	}
	if g.finalOK {
		fn(&g.final, true)
	}
}

// cutCycles runs a depth-first search over group edges (members, then the
// final) in configuration order and cuts every edge that closes a cycle.
func (b *builder) cutCycles() {
	m := b.m
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(m.groups))
	var path []int32
	var visit func(i int32)
	visit = func(i int32) {
		color[i] = grey
		path = append(path, i)
		g := &m.groups[i]
		g.edges(func(e *edge, final bool) {
			if e.kind != kindGroup {
				return
			}
			switch color[e.idx] {
			case grey:
				e.cut = true
				start := slices.Index(path, e.idx)
				names := make([]string, 0, len(path)-start+1)
				for _, p := range path[start:] {
					names = append(names, m.groups[p].tag)
				}
				names = append(names, e.tag)
				what := "member"
				if final {
					what = "final"
				}
				b.warn("group %q: %s %q closes the cycle %s; the edge is cut", g.tag, what, e.tag, strings.Join(names, " -> "))
			case white:
				visit(e.idx)
			}
		})
		path = path[:len(path)-1]
		color[i] = black
	}
	for i := range m.groups {
		if color[i] == white {
			visit(int32(i))
		}
	}
}

// checkDepth warns about every group whose nesting (members and finals,
// cut edges left out) is deeper than plane.MaxGroupDepth groups: selection
// through it refuses what lies below the bound.
func (b *builder) checkDepth() {
	m := b.m
	height := make([]int, len(m.groups))
	var h func(i int32) int
	h = func(i int32) int {
		if height[i] > 0 {
			return height[i]
		}
		d := 1
		m.groups[i].edges(func(e *edge, _ bool) {
			if e.kind == kindGroup && !e.cut {
				d = max(d, 1+h(e.idx))
			}
		})
		height[i] = d
		return d
	}
	for i := range m.groups {
		if d := h(int32(i)); d > plane.MaxGroupDepth {
			b.warn("group %q: nesting is %d groups deep, deeper than %d; selection through it refuses what lies below the %dth", m.groups[i].tag, d, plane.MaxGroupDepth, plane.MaxGroupDepth)
		}
	}
}

// closures fills every group's reachable-final closure (members and
// finals, cut edges left out) and the ancestors of every node.
func (m *Manager) closures() {
	done := make([]bool, len(m.groups))
	var visit func(i int32)
	visit = func(i int32) {
		if done[i] {
			return
		}
		done[i] = true
		g := &m.groups[i]
		seen := make(map[int32]bool)
		g.edges(func(e *edge, _ bool) {
			if e.cut {
				return
			}
			switch e.kind {
			case kindLeaf:
				if !seen[e.idx] {
					seen[e.idx] = true
					g.closure = append(g.closure, e.idx)
				}
			case kindBalancer:
				g.hasBal = true
			case kindGroup:
				visit(e.idx)
				s := &m.groups[e.idx]
				g.hasBal = g.hasBal || s.hasBal
				for _, l := range s.closure {
					if !seen[l] {
						seen[l] = true
						g.closure = append(g.closure, l)
					}
				}
			}
		})
	}
	m.ancestors = make(map[health.NodeID][]int32)
	for i := range m.groups {
		visit(int32(i))
		for _, l := range m.groups[i].closure {
			n := m.leaves[l].Node
			m.ancestors[n] = append(m.ancestors[n], int32(i))
		}
	}
}

// soles recomputes, for every group, the only leaf reachable for TCP
// through the current Selector TCP choices (members and finals; none or
// many otherwise): the leaf of the TCP last resort.
// Called at construction and under m.mu after every choice write.
func (m *Manager) soles() {
	const (
		unseen = iota
		busy
		done
	)
	state := make([]uint8, len(m.groups))
	val := make([]int32, len(m.groups))
	var visit func(i int32) int32
	of := func(e *edge) int32 {
		switch {
		case e.cut:
			return none
		case e.kind == kindLeaf:
			return e.idx
		case e.kind == kindBalancer:
			return many
		}
		return visit(e.idx)
	}
	visit = func(i int32) int32 {
		switch state[i] {
		case done:
			return val[i]
		case busy:
			return none
		}
		state[i] = busy
		g := &m.groups[i]
		v := none
		if g.pol == selector {
			if c := g.effective(0); c >= 0 {
				v = union(v, of(&g.members[c]))
			}
		} else {
			for j := range g.members {
				v = union(v, of(&g.members[j]))
			}
		}
		if g.finalOK {
			v = union(v, of(&g.final))
		}
		state[i], val[i] = done, v
		return v
	}
	for i := range m.groups {
		m.groups[i].sole.Store(visit(int32(i)))
	}
}

func union(a, b int32) int32 {
	switch {
	case a == none:
		return b
	case b == none || a == b:
		return a
	}
	return many
}
