package group

import (
	"sync"

	"switchyard/health"
	"switchyard/netx"
)

// slot is a group's connectivity per domain and family: -1 not yet
// published, 0 dead, 1 alive.
type slot [3][2]int8

type connEvent struct {
	g     int32
	d     health.Domain
	f     netx.Family
	alive bool
}

// connState publishes connectivity changes in order without holding a
// lock across OnConnectivity: one caller at a time is the emitter and
// publishes what every caller marked until nothing is left; the others
// mark and return.
type connState struct {
	mu        sync.Mutex
	emitting  bool
	pending   bool // some group is dirty
	force     bool // publish every slot, changed or not
	dirty     []bool
	published []slot

	// The emitter's, sized at construction.
	work []int32
	vals []slot
	out  []connEvent
}

func (c *connState) init(n int) {
	c.dirty = make([]bool, n)
	c.published = make([]slot, n)
	for i := range c.published {
		c.published[i] = slot{{-1, -1}, {-1, -1}, {-1, -1}}
	}
	c.work = make([]int32, 0, n)
	c.vals = make([]slot, 0, n)
	c.out = make([]connEvent, 0, 6*n)
}

// NodeChanged is a health transition of node id: it drops the cached
// URLTest rankings and republishes the connectivity of every group that
// reaches the node (finals included), each slot only when it changed.
func (m *Manager) NodeChanged(id health.NodeID) {
	m.gen.Add(1)
	c := &m.conn
	c.mu.Lock()
	for _, g := range m.ancestors[id] {
		c.dirty[g] = true
		c.pending = true
	}
	c.mu.Unlock()
	m.emit()
}

// PublishConnectivity publishes the exact connectivity of every slot of
// every group, changed or not: after a reload's fail-open, once the new
// plane is published.
func (m *Manager) PublishConnectivity() {
	m.conn.mu.Lock()
	m.conn.force = true
	m.conn.mu.Unlock()
	m.emit()
}

// PublishFailOpen sets every slot of old's and m's groups alive, before m
// is published: a reload's transition is fail-open until
// PublishConnectivity writes the exact snapshot. It must not run
// concurrently with m's other connectivity calls (m is not yet
// published).
func (m *Manager) PublishFailOpen(old *Manager) {
	c := &m.conn
	c.mu.Lock()
	for i := range c.published {
		c.published[i] = slot{{1, 1}, {1, 1}, {1, 1}}
	}
	c.mu.Unlock()
	cb := m.o.OnConnectivity
	if cb == nil {
		return
	}
	seen := make(map[string]bool, len(m.groups))
	each := func(tag string) {
		if seen[tag] {
			return
		}
		seen[tag] = true
		for _, d := range health.Domains {
			for _, f := range health.Families {
				cb(tag, d, f, true)
			}
		}
	}
	if old != nil {
		for i := range old.groups {
			each(old.groups[i].tag)
		}
	}
	for i := range m.groups {
		each(m.groups[i].tag)
	}
}

// markAll marks every group dirty (a choice write may change the TCP
// exception of any ancestor).
func (m *Manager) markAll() {
	c := &m.conn
	c.mu.Lock()
	for i := range c.dirty {
		c.dirty[i] = true
	}
	c.pending = len(c.dirty) > 0
	c.mu.Unlock()
}

func (m *Manager) emit() {
	c := &m.conn
	c.mu.Lock()
	if c.emitting {
		c.mu.Unlock()
		return
	}
	c.emitting = true
	for c.pending || c.force {
		force := c.force
		c.pending, c.force = false, false
		c.work = c.work[:0]
		for i, d := range c.dirty {
			if d || force {
				c.work = append(c.work, int32(i))
				c.dirty[i] = false
			}
		}
		c.mu.Unlock()
		c.vals = c.vals[:0]
		for _, g := range c.work {
			c.vals = append(c.vals, m.connectivity(g))
		}
		c.mu.Lock()
		c.out = c.out[:0]
		for j, g := range c.work {
			for d := range 3 {
				for f := range 2 {
					v := c.vals[j][d][f]
					if force || c.published[g][d][f] != v {
						c.published[g][d][f] = v
						c.out = append(c.out, connEvent{g: g, d: health.Domain(d), f: netx.Family(f), alive: v == 1})
					}
				}
			}
		}
		c.mu.Unlock()
		if cb := m.o.OnConnectivity; cb != nil {
			for _, e := range c.out {
				cb(m.groups[e.g].tag, e.d, e.f, e.alive)
			}
		}
		c.mu.Lock()
	}
	c.emitting = false
	c.mu.Unlock()
}

// connectivity is group g's slot now: per domain and family, the OR of its
// reachable leaves' states (finals included; UDP domains only for leaves
// that can carry UDP; a balancer counts alive, its leaves unknown), and for
// TCP alive when the group has no final and exactly one leaf through the
// current choices (the last resort serves it).
func (m *Manager) connectivity(gi int32) slot {
	g := &m.groups[gi]
	var s slot
	for d := range 3 {
		for f := range 2 {
			v := g.hasBal
			for _, li := range g.closure {
				if v {
					break
				}
				v = m.leafAlive(li, health.Domain(d), netx.Family(f))
			}
			if health.Domain(d) == health.TCP && !g.hasFinal && g.sole.Load() >= 0 {
				v = true
			}
			if v {
				s[d][f] = 1
			}
		}
	}
	return s
}

func (m *Manager) leafAlive(li int32, d health.Domain, f netx.Family) bool {
	l := &m.leaves[li]
	switch {
	case l.Block:
		return true
	case d != health.TCP && !l.UDP:
		return false
	}
	return m.h.Alive(l.Node, d, f)
}
