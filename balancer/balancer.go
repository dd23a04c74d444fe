// Package balancer chooses one of several outbounds per flow or per packet,
// by failover or round robin over the members a TCP probe finds healthy.
package balancer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"switchyard/netx"
	"switchyard/plane"
)

// Member is one outbound a balancer may choose.
type Member struct {
	// Target is the outbound version the plane holds under the member's tag,
	// so a flow through the balancer is guarded and drained by it.
	Target *plane.Target
	// Probe is the member's upstream (host:port), reached by a plain TCP
	// connect to decide whether the member is healthy.
	Probe netx.Addr
}

type member struct {
	Member
	up atomic.Bool
}

// Balancer picks a member target for each flow (Select) or packet
// (SelectPreferring). Selection is lock-free; health comes from probes
// (StartProbes) or SetHealthy.
type Balancer struct {
	members  []member // fixed after New
	strategy Strategy
	next     atomic.Uint64 // round-robin counter; keeps running as health changes
	log      *slog.Logger

	// ctl serialises StartProbes and Stop. Probe goroutines never take it.
	ctl    sync.Mutex
	cancel context.CancelFunc // ends the running probes; nil when none run
	probes sync.WaitGroup
}

var _ plane.Chooser = (*Balancer)(nil)

// Choose is SelectPreferring for the plane: it prefers q.Prefer.
func (b *Balancer) Choose(q *plane.Query) *plane.Target { return b.SelectPreferring(q.Prefer) }

// New builds the balancer tag over members, in configured order. Every member
// starts healthy: one never probed counts as up.
func New(tag string, members []Member, s Strategy, log *slog.Logger) (*Balancer, error) {
	if len(members) == 0 {
		return nil, errors.New("a balancer needs at least one outbound")
	}
	if s != Failover && s != RoundRobin {
		return nil, fmt.Errorf("unknown balancer strategy %s", s)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Balancer{members: make([]member, len(members)), strategy: s, log: log.With("balancer", tag)}
	for i, m := range members {
		if m.Target == nil {
			return nil, fmt.Errorf("balancer member %d has no target", i)
		}
		if !m.Probe.IsValid() {
			return nil, fmt.Errorf("balancer member %s has no upstream to probe", m.Target.ID().Tag)
		}
		b.members[i].Member = m
		b.members[i].up.Store(true)
	}
	return b, nil
}

// Select returns the target of the member a new flow goes to: under
// Failover the first healthy member, under RoundRobin the next healthy one.
// With every member down it returns the first member rather than none: a
// flow sent at an upstream that may have recovered beats one dropped for
// certain.
func (b *Balancer) Select() *plane.Target {
	if m := b.pick(); m != nil {
		return m.Target
	}
	return b.members[0].Target
}

// SelectPreferring is Select for a packet of an association that already
// uses the version prefer. Under RoundRobin a healthy preferred member is
// kept, so an association does not hop between members; under Failover the
// preference is ignored. A preference names one version: after its member is
// rebuilt it names no member and counts as none.
func (b *Balancer) SelectPreferring(prefer *plane.OutboundID) *plane.Target {
	if b.strategy == RoundRobin && prefer != nil {
		for i := range b.members {
			m := &b.members[i]
			if m.Target.ID() == *prefer && m.up.Load() {
				return m.Target
			}
		}
	}
	return b.Select()
}

// pick returns the member chosen by the strategy among the healthy ones, or
// nil when none is healthy.
func (b *Balancer) pick() *member {
	switch b.strategy {
	case Failover:
		for i := range b.members {
			if b.members[i].up.Load() {
				return &b.members[i]
			}
		}
	case RoundRobin:
		n := 0
		for i := range b.members {
			if b.members[i].up.Load() {
				n++
			}
		}
		if n == 0 {
			return nil
		}
		k := int((b.next.Add(1) - 1) % uint64(n))
		for i := range b.members {
			if !b.members[i].up.Load() {
				continue
			}
			if k == 0 {
				return &b.members[i]
			}
			k--
		}
		// Members went down between the two passes: treat as none healthy.
	}
	return nil
}

// SetHealthy records member i's health and returns the previous value. A
// change is logged at info level.
func (b *Balancer) SetHealthy(i int, up bool) (was bool) {
	m := &b.members[i]
	was = m.up.Swap(up)
	if was != up {
		state := "down"
		if up {
			state = "up"
		}
		b.log.Info(fmt.Sprintf("balancer member %s is now %s", m.Target.ID().Tag, state))
	}
	return was
}

// Healthy reports member i's health.
func (b *Balancer) Healthy(i int) bool { return b.members[i].up.Load() }

// Status is what a reader sees of a balancer: the member a new flow goes
// to now (Failover: the first healthy, "" when none is; RoundRobin: ""
// as no one member is current), and each member's health in order.
type Status struct {
	Now string
	Up  []bool
}

// Status reads the balancer's state without moving the round-robin
// cursor.
func (b *Balancer) Status() Status {
	st := Status{Up: make([]bool, len(b.members))}
	for i := range b.members {
		st.Up[i] = b.members[i].up.Load()
		if b.strategy == Failover && st.Now == "" && st.Up[i] {
			st.Now = b.members[i].Target.ID().Tag
		}
	}
	return st
}
