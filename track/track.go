// Package track is the flow table: every TCP flow and every UDP sub-link the
// router opens is registered here with its routing facts and two byte
// counters, listed for the API, and can be killed by id or interrupted by
// what its facts match.
package track

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// ErrKilled is what reads and writes of a flow return once the flow was
// killed or interrupted through the tracker. It matches net.ErrClosed too:
// the flow's conn or link was closed, by its owner, so a relay takes the
// end for an owner's stop and not for a failure of the upstream.
var ErrKilled error = killedError{}

type killedError struct{}

func (killedError) Error() string        { return "flow killed" }
func (killedError) Is(target error) bool { return target == net.ErrClosed }

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
	// Chain is the selection chain the flow took: the route target's tag,
	// each selected sub-group's, then the leaf's (plane.Query.Path); nil
	// when it was not recorded. The table keeps the slice as given and
	// shares it with every snapshot: nobody modifies it.
	Chain []string
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
	mu    sync.Mutex // guards flows, last, ended and live
	flows map[uint64]*meter
	last  uint64               // the id given to the latest flow; ids start at 1
	ended map[totalsKey]*ended // the totals of every key (totals.go)
	live  live                 // the ordered index and the closed log (live.go)

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
	if ok {
		t.dropLocked(m)
	}
	t.mu.Unlock()
	if ok {
		m.kill()
	}
	return ok
}

// interruptWorkers bounds the closes one Interrupt runs at once: a close
// may take a while (a TLS conn sends its close_notify), and many flows
// should not wait on each other, nor start a goroutine each.
const interruptWorkers = 16

// Interrupt closes every live flow whose meta matches, TCP conns and UDP
// sub-links alike, as Kill does (their owners see ErrKilled), and returns
// how many it closed once every one of those closes has returned. match is
// called without the tracker's lock held, and no lock is held while closing.
//
// A flow is counted by the one caller whose close ran: a flow that was
// already closing, on its own, by Kill or by a concurrent Interrupt, is
// not closed again and not counted, though Interrupt still waits for that
// close to return before it does. So concurrent Interrupts that match the
// same flow count it once in all, and a flow that closes on its own
// meanwhile is counted by none.
func (t *Tracker) Interrupt(match func(Meta) bool) int {
	t.mu.Lock()
	live := make([]*meter, 0, len(t.flows))
	for _, m := range t.flows {
		live = append(live, m)
	}
	t.mu.Unlock()
	hit := live[:0]
	for _, m := range live {
		if match(m.meta) {
			hit = append(hit, m)
		}
	}
	if len(hit) == 1 {
		if hit[0].interrupt() {
			return 1
		}
		return 0
	}
	var (
		next, closed atomic.Int64
		wg           sync.WaitGroup
	)
	for range min(len(hit), interruptWorkers) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(hit) {
					return
				}
				if hit[i].interrupt() {
					closed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(closed.Load())
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
	t.enterLocked(m)
	t.live.index(m)
	t.mu.Unlock()
}

// remove takes m out of the table once its close has returned.
func (t *Tracker) remove(m *meter) {
	t.mu.Lock()
	if cur, ok := t.flows[m.id]; ok && cur == m {
		t.dropLocked(m) // a Kill took it out already
	}
	t.live.unindex(m)
	t.mu.Unlock()
}
