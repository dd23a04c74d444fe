package score

import (
	"errors"
	"sync"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// Capacities of the evidence tables.
const (
	ExactCells     = 4096
	AggregateCells = 4096
)

// ErrNotMember is returned by Begin for a (group, node) pair the current
// configuration does not have: late work for deleted membership.
var ErrNotMember = errors.New("score: node is not a member of the group")

// Clock is the scorer's source of time for reads; events carry their own
// event times. health.Clock and healthtest.Clock satisfy it.
type Clock interface{ Now() time.Time }

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Member is one (group, node) pair of the configuration, with the node's
// incarnation (health.Node.Incarnation): a changed incarnation is a
// changed node whose old evidence is dropped.
type Member struct {
	Group       GroupID
	Node        health.NodeID
	Incarnation uint64
}

// Scorer holds the Score evidence of every Score group of one process:
// memory-only, populated on demand, bounded by its two LRUs. It starts no
// goroutine and arms no timer; every method is safe for concurrent use and
// none does I/O under its lock.
type Scorer struct {
	clock Clock

	mu      sync.Mutex
	members map[member]uint64 // → incarnation
	exact   *lru[exactKey]
	agg     *lru[aggKey]
	seq     uint64 // reporter ids, episodes and node records, scorer-wide
}

// New returns a scorer for members; a nil clock is the wall clock.
func New(clock Clock, members []Member) *Scorer {
	if clock == nil {
		clock = wallClock{}
	}
	s := &Scorer{clock: clock, exact: newLRU[exactKey](ExactCells), agg: newLRU[aggKey](AggregateCells)}
	s.members = membersOf(members)
	return s
}

func membersOf(ms []Member) map[member]uint64 {
	m := make(map[member]uint64, len(ms))
	for _, x := range ms {
		m[member{x.Group, x.Node}] = x.Incarnation
	}
	return m
}

func (s *Scorer) next() uint64 {
	s.seq++
	return s.seq
}

// NewEpisode returns a fresh episode for one fanned-out failure: the
// owner of a shared carrier, source, packet endpoint or dial stamps it on
// the Failure of every flow it fails.
func (s *Scorer) NewEpisode() EpisodeID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return EpisodeID(s.next())
}

// Reload commits a new configuration at at: cells whose group or node is
// gone, or whose node changed incarnation, are dropped (reporters holding
// them go inert); every surviving cell is fenced — qualification, leases,
// availability cohorts and probe baselines are revoked, while numeric
// evidence and open hard episodes stay.
func (s *Scorer) Reload(at time.Time, members []Member) {
	t := at.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.members = membersOf(members)
	s.agg.each(func(k aggKey, c *cell) {
		if inc, ok := s.members[k.member()]; !ok || inc != c.inc {
			s.agg.remove(k)
			return
		}
		c.reload(t)
	})
	s.exact.each(func(k exactKey, c *cell) {
		if inc, ok := s.members[k.member()]; !ok || inc != c.inc {
			s.exact.remove(k)
			return
		}
		c.reload(t)
	})
}

// Cells returns the number of exact and aggregate cells held.
func (s *Scorer) Cells() (exact, aggregate int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exact.len(), s.agg.len()
}

// keyOf resolves a Scope to its exact key; hasTarget is false for
// targetless work.
func keyOf(sc Scope) (k exactKey, hasTarget bool, err error) {
	t, ok, err := normalizeTarget(sc.Target)
	if err != nil {
		return exactKey{}, false, err
	}
	return exactKey{group: sc.Group, node: sc.Node, net: sc.Network, fam: familyOf(sc.Target, sc.Family), tgt: t}, ok, nil
}

// aggCell returns the aggregate cell under k, created (as a child of
// global g when k is a family key) if absent.
func (s *Scorer) aggCell(k aggKey, inc uint64, g *cell) *cell {
	if c := s.agg.get(k); c != nil {
		c.sync(g)
		return c
	}
	c := s.agg.add(k)
	c.inc = inc
	if g != nil {
		c.inherit(g)
	}
	return c
}

// cells returns the global, family and exact cells of k (exact nil when
// targetless), created on demand, each child synced with the global
// aggregate's node record.
func (s *Scorer) cells(k exactKey, hasTarget bool, inc uint64) (g, f, e *cell) {
	g = s.aggCell(k.global(), inc, nil)
	f = s.aggCell(k.family(), inc, g)
	if !hasTarget {
		return g, f, nil
	}
	if e = s.exact.get(k); e != nil {
		e.sync(g)
		e.pf, e.pg = f, g
		return g, f, e
	}
	e = s.exact.add(k)
	e.inc = inc
	e.inherit(g)
	e.pf, e.pg = f, g
	return g, f, e
}

// Begin starts a business flow's reporting at at: it counts one attempt
// in each of the Scope's layers and returns the flow's Reporter. It
// refuses a pair that is not a member (ErrNotMember) and a target that
// cannot be normalized (ErrBadTarget).
func (s *Scorer) Begin(sc Scope, at time.Time) (*Reporter, error) {
	k, hasTarget, err := keyOf(sc)
	if err != nil {
		return nil, err
	}
	t := at.UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	inc, ok := s.members[k.member()]
	if !ok {
		return nil, ErrNotMember
	}
	r := &Reporter{s: s, id: s.next(), key: k, hasTarget: hasTarget}
	r.cells[0], r.cells[1], r.cells[2] = s.cells(k, hasTarget, inc)
	for _, c := range r.cells {
		if c != nil {
			c.ev.add(attempts, t, 1)
		}
	}
	return r, nil
}

// View reads sc's blended evidence at the clock's now. It creates no cell
// and refreshes no LRU position: a read is neutral.
func (s *Scorer) View(sc Scope) (View, error) {
	k, hasTarget, err := keyOf(sc)
	if err != nil {
		return View{}, err
	}
	now := s.clock.Now().UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.agg.peek(k.global())
	f := s.agg.peek(k.family())
	var e *cell
	if hasTarget {
		e = s.exact.peek(k)
	}
	if f != nil {
		f.sync(g)
	}
	if e != nil {
		e.sync(g)
	}
	return newView(g, f, e, now), nil
}

// RecordProbe records a configured health probe of node for group on
// network, started at started: its RTT when ok, else a failure that
// invalidates the slot. It feeds only the global aggregate's probe slot:
// no outcome, qualification or availability. A probe started at or before
// the node's latest failure or the latest reload is dropped.
func (s *Scorer) RecordProbe(group GroupID, network netx.Network, node health.NodeID, started time.Time, rtt time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	inc, member := s.members[member{group, node}]
	if !member {
		return
	}
	k := aggKey{group: group, node: node, net: network, fam: noFamily}
	s.aggCell(k, inc, nil).probe(started.UnixNano(), rtt, ok)
}

// NewEpisodeID is a fresh scorer-wide sequence number (a probe's own
// reporter identity in the comparison store).
func (s *Scorer) NewEpisodeID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next()
}
