// Package track is the flow table: every TCP flow and every UDP sub-link the
// router opens is registered here with its routing facts and two byte
// counters, listed for the API, and can be killed by id.
package track

import (
	"errors"
	"net/netip"
	"sync"
	"time"

	"switchyard/netx"
)

// ErrKilled is what reads and writes of a flow return once the flow was
// killed through the tracker.
var ErrKilled = errors.New("flow killed")

// Meta is what the flow table shows about a flow besides its counters.
type Meta struct {
	Network     netx.Network
	Inbound     string
	User        string
	Source      netip.AddrPort
	Destination netx.Addr
	Sniffed     string
	Rule        string // "rule 3" or "final" (plane.RuleName)
	Outbound    string // the outbound version, "tag@v1"
	Epoch       uint64 // the plane epoch the flow was routed on
	Session     uint64 // the session the flow is filed under; 0 when none
}

// Snapshot is one flow as it stands: Up counts bytes toward the destination,
// Down bytes from it.
type Snapshot struct {
	ID uint64
	Meta
	Start    time.Time
	Up, Down int64
}

// Tracker holds the live flows. Its table is bounded by the number of live
// flows: a flow leaves it when its conn or link is closed.
type Tracker struct {
	mu    sync.Mutex // guards flows and last
	flows map[uint64]*meter
	last  uint64 // the id given to the latest flow; ids start at 1

	sessions sessions  // session.go
	users    users     // users.go
	dials    dialTable // dials in progress (dialing.go)
}

// New returns an empty tracker.
func New() *Tracker { return &Tracker{flows: make(map[uint64]*meter)} }

// Flows returns the live flows ordered by id.
func (t *Tracker) Flows() []Snapshot {
	return byID(&t.mu, t.flows, (*meter).snapshot, func(s Snapshot) uint64 { return s.ID })
}

// Lookup returns the live flow with id.
func (t *Tracker) Lookup(id uint64) (Snapshot, bool) {
	t.mu.Lock()
	m, ok := t.flows[id]
	t.mu.Unlock()
	if !ok {
		return Snapshot{}, false
	}
	return m.snapshot(), true
}

// Kill closes the conn or link of the live flow with id and reports whether
// there was one. The flow's owner then sees ErrKilled from its reads and
// writes and ends the flow.
func (t *Tracker) Kill(id uint64) bool {
	t.mu.Lock()
	m, ok := t.flows[id]
	delete(t.flows, id)
	t.mu.Unlock()
	if ok {
		m.kill()
	}
	return ok
}

// add registers m under a fresh id, filed under its session when that is
// live. datagram says m is a UDP sub-link, whose payload counts toward the
// session only when the session charges datagrams.
func (t *Tracker) add(m *meter, datagram bool) {
	m.t = t
	m.start = time.Now()
	if s := t.sessions.lookup(m.meta.Session); s != nil {
		m.file(s, !datagram || s.info.ChargeDatagrams)
	} else {
		m.meta.Session = 0
	}
	t.mu.Lock()
	t.last++
	m.id = t.last
	t.flows[m.id] = m
	t.mu.Unlock()
}

func (t *Tracker) remove(id uint64) {
	t.mu.Lock()
	delete(t.flows, id)
	t.mu.Unlock()
}
