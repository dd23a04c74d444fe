package health

import (
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// Node is a node as the engine registers it.
type Node struct {
	ID   NodeID
	Name string // display name, for logs and callbacks; not identity
	// Prober measures the node through its own outbound.
	Prober Prober
	// UDP is set when the node carries UDP: its packet path is probed
	// (with Options.UDPCheckDNS configured).
	UDP bool
	// Incarnation changes when the node's configuration changed: Sync
	// then restarts its state, grace included.
	Incarnation uint64
}

// meta is what Sync may replace on a kept node.
type meta struct {
	name   string
	prober Prober
	udp    bool
}

// view is the published, immutable read state of a node: selection loads
// it with one atomic load and never locks.
type view struct {
	st      [3][2]cellView // by Domain, Family
	strikes int
}

type cellView struct {
	observed, alive bool
	avg             time.Duration
	hasAvg          bool
}

// initialView is the view of a node nothing has reported on: alive.
var initialView = func() *view {
	v := new(view)
	for d := range v.st {
		for f := range v.st[d] {
			v.st[d][f].alive = true
		}
	}
	return v
}()

// maxTransitions is the most transitions one update makes: one per state.
const maxTransitions = 6

// node is the engine's record of one registered node.
type node struct {
	id          NodeID
	incarnation uint64
	registered  time.Time
	graceUntil  time.Time

	meta    atomic.Pointer[meta]
	snap    atomic.Pointer[view]
	removed atomic.Bool // dropped by Sync: late results publish nothing
	// A probe of the path is in flight: periodic, recovery and urgent
	// passes leave the path alone meanwhile.
	tcpBusy, udpBusy atomic.Bool

	mu    sync.Mutex // guards the fields below
	cells [3][2]cell
	dial  dialStats
	last  Sample // the last real TCP delay
	has   bool   // last is set
	// scratch collects the transitions of one update (at most one per
	// state) under mu.
	scratch [maxTransitions]transition
}

func newNode(n Node, now time.Time) *node {
	x := &node{
		id:          n.ID,
		incarnation: n.Incarnation,
		registered:  now,
		graceUntil:  now.Add(Grace),
	}
	x.meta.Store(&meta{name: n.Name, prober: n.Prober, udp: n.UDP})
	x.snap.Store(initialView)
	for d := range x.cells {
		for f := range x.cells[d] {
			x.cells[d][f] = newCell()
		}
	}
	return x
}

func (n *node) name() string { return n.meta.Load().name }

// counts reports whether a failure counts toward death: forced ones
// always, others once the grace of a new node is over.
func (n *node) counts(now time.Time, forced bool) bool {
	return forced || !now.Before(n.graceUntil)
}

// publishLocked stores a new view when the read state changed and reports
// whether it did. n.mu is held.
func (n *node) publishLocked() bool {
	var v view
	for d := range n.cells {
		for f := range n.cells[d] {
			c := &n.cells[d][f]
			v.st[d][f] = cellView{observed: c.observed, alive: c.alive, avg: c.avg, hasAvg: c.hasAvg}
		}
	}
	v.strikes = n.dial.strikes()
	if v == *n.snap.Load() {
		return false
	}
	p := new(view) // v itself stays on the stack when nothing changed
	*p = v
	n.snap.Store(p)
	return true
}

// dialStats is what real dials taught about a node: the failure streak and
// its strikes, and the latency EMA of fresh dials with its slow streak.
type dialStats struct {
	failStreak  int // consecutive real dial failures
	goodStreak  int // consecutive real dial successes, slow ones excepted
	failStrikes int // one per two consecutive dial failures
	slowStrikes int // one per three consecutive slow dials
	probeOK     int // consecutive TCP probe successes since the last slow strike
	slowStreak  int // consecutive slow fresh dials
	ema         time.Duration
	samples     int // fresh dials folded into ema (saturates)
}

func (s *dialStats) strikes() int { return s.failStrikes + s.slowStrikes }

// slowAbove is the slow-dial threshold of an EMA:
// max(min(2×EMA, EMA+500ms), 250ms).
func slowAbove(ema time.Duration) time.Duration {
	return max(min(2*ema, ema+SlowDialSlack), SlowDialFloor)
}

// fresh folds the latency of one fresh (not pooled) successful dial into
// the EMA and reports whether it was slow: after DialEMAWarmup dials,
// above the threshold of the EMA before it.
func (s *dialStats) fresh(lat time.Duration) (slow bool) {
	if s.samples >= DialEMAWarmup {
		slow = lat > slowAbove(s.ema)
	}
	if s.samples == 0 {
		s.ema = lat
	} else {
		s.ema += (lat - s.ema) / DialEMADivisor
	}
	if s.samples < DialEMAWarmup {
		s.samples++
	}
	return slow
}

// state gives the introspected cells of the node. n.mu is held.
func (n *node) stateLocked() (out [3][2]DomainState) {
	for d := range n.cells {
		for f := range n.cells[d] {
			out[d][f] = n.cells[d][f].state(netx.Family(f))
		}
	}
	return out
}
