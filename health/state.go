package health

import (
	"time"

	"switchyard/netx"
)

// NodeState is the introspected state of a node, for the API and the CLI.
type NodeState struct {
	ID          NodeID
	Name        string
	Incarnation uint64
	// Registered is when this incarnation was registered; failures before
	// GraceUntil (60 s later) do not count toward death.
	Registered, GraceUntil time.Time
	// States are the six states, by Domain and Family.
	States [3][2]DomainState
	// Strikes is FailureStrikes + SlowStrikes, as selection reads it.
	Strikes, FailureStrikes, SlowStrikes int
	// DialFailures is the current streak of consecutive real dial failures.
	DialFailures int
	// DialEMA is the latency EMA of fresh real dials; DialEMAWarm is set
	// once DialEMAWarmup dials fed it (slow dials are judged from then on).
	DialEMA     time.Duration
	DialEMAWarm bool
	// LastReal is the last real TCP delay sample, when HasLastReal.
	LastReal    Sample
	HasLastReal bool
}

// State returns the state of node id; ok is false for an ID not registered.
// It allocates (histories are copied).
func (e *Engine) State(id NodeID) (s NodeState, ok bool) {
	n := e.node(id)
	if n == nil {
		return NodeState{}, false
	}
	m := n.meta.Load()
	n.mu.Lock()
	defer n.mu.Unlock()
	return NodeState{
		ID:             n.id,
		Name:           m.name,
		Incarnation:    n.incarnation,
		Registered:     n.registered,
		GraceUntil:     n.graceUntil,
		States:         n.stateLocked(),
		Strikes:        n.dial.strikes(),
		FailureStrikes: n.dial.failStrikes,
		SlowStrikes:    n.dial.slowStrikes,
		DialFailures:   n.dial.failStreak,
		DialEMA:        n.dial.ema,
		DialEMAWarm:    n.dial.samples >= DialEMAWarmup,
		LastReal:       n.last,
		HasLastReal:    n.has,
	}, true
}

// Of returns the state of domain d and family f.
func (s NodeState) Of(d Domain, f netx.Family) DomainState { return s.States[d][f&1] }

// LastReal returns the last real (measured, never synthetic) TCP delay of
// node id, of either family, for the store to persist (every 60 s).
func (e *Engine) LastReal(id NodeID) (Sample, bool) {
	n := e.node(id)
	if n == nil {
		return Sample{}, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.last, n.has
}

// Restore seeds node id with a persisted last real TCP delay at startup:
// used only when s is a real success at most RestoreMaxAge old. It enters
// the history and, when the state has no average yet, initializes it, so
// ranking has a baseline before the first probe. Liveness is never
// restored: the state stays unobserved.
func (e *Engine) Restore(id NodeID, s Sample) {
	n := e.node(id)
	if n == nil || s.Synthetic || s.Delay <= 0 {
		return
	}
	f := s.Family & 1
	e.mutate(n, func(now time.Time, ts []transition) []transition {
		if age := now.Sub(s.Time); age > RestoreMaxAge || age < -RestoreMaxAge {
			return ts
		}
		c := &n.cells[TCP][f]
		c.record(s.Time, s.Delay, false)
		if !c.hasAvg {
			c.average(s.Delay)
		}
		if !n.has || s.Time.After(n.last.Time) {
			s.Family = f
			n.last, n.has = s, true
		}
		return ts
	})
}
