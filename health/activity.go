package health

import (
	"sync/atomic"
	"time"
)

// Activity is which nodes a group holds, and whether its probing sleeps.
type Activity struct {
	Group string
	// Sleeps is set for an urltest-like group: its nodes' probing sleeps
	// once the group has gone IdleTimeout without a real selection.
	Sleeps bool
	// IdleTimeout is the group's idle time; 0 takes Options.IdleTimeout.
	IdleTimeout time.Duration
	Nodes       []NodeID
}

// activity is the published SyncActivity state: read without lock by
// Selected and the passes.
type activity struct {
	groups  map[string]*group
	holders map[NodeID][]*group
}

type group struct {
	name   string
	sleeps bool
	idle   time.Duration
	nodes  []NodeID
	last   atomic.Int64 // unix nanoseconds of the last real selection
}

// awake reports whether g's nodes are probed: it does not sleep, or was
// selected within its idle time.
func (g *group) awake(now int64) bool {
	return !g.sleeps || now-g.last.Load() <= int64(g.idle)
}

// SyncActivity sets which groups hold which nodes, the whole set. A node is
// probed periodically unless every group holding it Sleeps and has been
// idle longer than its IdleTimeout; a node no group holds is probed. A
// group kept by name keeps its last selection time; a new group counts as
// selected now.
func (e *Engine) SyncActivity(a []Activity) {
	e.ctl.Lock()
	defer e.ctl.Unlock()
	now := e.clock.Now().UnixNano()
	old := e.act.Load()
	next := &activity{groups: make(map[string]*group, len(a)), holders: make(map[NodeID][]*group)}
	for _, x := range a {
		g := &group{name: x.Group, sleeps: x.Sleeps, idle: x.IdleTimeout, nodes: append([]NodeID(nil), x.Nodes...)}
		if g.idle <= 0 {
			g.idle = e.idle
		}
		if prev, ok := old.groups[x.Group]; ok {
			g.last.Store(prev.last.Load())
		} else {
			g.last.Store(now)
		}
		next.groups[x.Group] = g
		for _, id := range g.nodes {
			next.holders[id] = append(next.holders[id], g)
		}
	}
	e.act.Store(next)
}

// selectedQuantum is how stale a group's last selection time may be: a
// selection within it of the last recorded one does not write it again, so
// concurrent selections read a shared line instead of writing it.
const selectedQuantum = time.Second

// Selected records a real selection through group. It is cheap (one clock
// read and atomics, no allocation while the group is awake); a group that
// was asleep wakes, and the probes of its nodes start at once.
func (e *Engine) Selected(group string) {
	g := e.act.Load().groups[group]
	if g == nil {
		return
	}
	now := e.clock.Now().UnixNano()
	prev := g.last.Load()
	if now-prev < int64(selectedQuantum) {
		return
	}
	if !g.last.CompareAndSwap(prev, now) {
		return // a concurrent selection recorded it
	}
	if g.sleeps && now-prev > int64(g.idle) {
		e.log.Debug("group " + g.name + " selected after idling: probing its nodes")
		e.urgent(g.nodes, urgentFull)
	}
}

// awake reports whether node id is probed periodically at now.
func (e *Engine) awake(id NodeID, now int64) bool {
	hs := e.act.Load().holders[id]
	if len(hs) == 0 {
		return true
	}
	for _, g := range hs {
		if g.awake(now) {
			return true
		}
	}
	return false
}
