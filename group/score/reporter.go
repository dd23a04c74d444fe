package score

import (
	"fmt"
	"log/slog"
	"time"
)

// RXInterval is the business-RX publication throttle: a reporter's first
// eligible RX publishes immediately, later ones at most once per interval.
const RXInterval = time.Second

// Reporter is one business flow's evidence reporter, from Scorer.Begin.
// The flow calls Setup, Response and Progress as they happen, then exactly
// one of Settle, Fail or Cancel; events after that are ignored, as are
// all events once the reporter's cells were pruned by a reload or evicted
// (an old reporter never recreates a cell). Every method takes the event's
// own time and is safe for concurrent use.
//
// Only a targeted Reporter earns availability: its eligible RX is
// positive RX at or after both its setup and its first positive TX.
// Probes, warm-up, targetless work, TX-only work and RX before setup earn
// none.
type Reporter struct {
	s         *Scorer
	id        uint64
	key       exactKey
	hasTarget bool
	cells     [3]*cell // global, family, exact (nil when targetless)

	// Guarded by s.mu.
	setupAt, txAt int64
	lastRX        int64 // latest published eligible RX
	pendingRX     int64 // a suppressed eligible RX, flushed later
	settled       bool
}

// String prints nothing that identifies the node or the target.
func (r *Reporter) String() string {
	return fmt.Sprintf("score reporter (%v, %v)", r.key.net, r.key.fam)
}

// GoString is String.
func (r *Reporter) GoString() string { return r.String() }

// LogValue keeps identities out of structured logs.
func (r *Reporter) LogValue() slog.Value {
	return slog.GroupValue(slog.String("network", r.key.net.String()), slog.String("family", r.key.fam.String()))
}

// MarshalJSON exports the network and family only.
func (r *Reporter) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `{"network":%q,"family":%q}`, r.key.net, r.key.fam), nil
}

// live calls f for each of the reporter's cells still in its table, the
// children synced with the global aggregate first.
func (r *Reporter) live(f func(i int, c *cell)) {
	g := r.cells[0]
	if g != nil && g.dead {
		g = r.s.agg.peek(r.key.global())
	}
	for i, c := range r.cells {
		if c == nil || c.dead {
			continue
		}
		if i > 0 {
			c.sync(g)
		}
		f(i, c)
	}
}

// Setup records that the flow's setup completed at at (first call only).
func (r *Reporter) Setup(at time.Time) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if !r.settled && r.setupAt == 0 {
		r.setupAt = at.UnixNano()
	}
}

// Response records the flow's first response byte at at: positive RX,
// the same evidence as Progress with rx > 0.
func (r *Reporter) Response(at time.Time) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled {
		return
	}
	r.rxLocked(at.UnixNano())
}

// Progress records tx accepted and rx delivered bytes at at.
func (r *Reporter) Progress(at time.Time, tx, rx int64) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled {
		return
	}
	t := at.UnixNano()
	if tx > 0 && r.txAt == 0 {
		r.txAt = t
	}
	if rx > 0 {
		r.rxLocked(t)
	}
}

// rxLocked handles positive RX at t: eligible RX publishes now or, inside
// the throttle interval, waits for the next publishable RX or settlement.
// It reports whether the RX was eligible.
func (r *Reporter) rxLocked(t int64) bool {
	if !r.hasTarget || r.setupAt == 0 || t < r.setupAt || r.txAt == 0 || t < r.txAt {
		return false
	}
	if r.lastRX != 0 && t-r.lastRX < int64(RXInterval) {
		r.pendingRX = max(r.pendingRX, t)
		return true
	}
	r.publishLocked(t)
	return true
}

func (r *Reporter) publishLocked(t int64) {
	r.pendingRX = 0
	r.lastRX = max(r.lastRX, t)
	r.live(func(_ int, c *cell) { c.rx(t, r.id) })
}

// flushLocked publishes a suppressed RX at its own event time.
func (r *Reporter) flushLocked() {
	if r.pendingRX != 0 {
		r.publishLocked(r.pendingRX)
	}
}

// Settle ends the flow successfully at at. A flow with eligible RX is a
// useful completion: a Beta success in every layer, and a completion
// toward each cell's qualification. One without is no outcome.
func (r *Reporter) Settle(at time.Time) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled {
		return
	}
	r.flushLocked()
	r.settled = true
	if r.lastRX == 0 {
		return
	}
	t := at.UnixNano()
	r.live(func(_ int, c *cell) { c.complete(t, r.lastRX) })
}

// Cancel ends the flow neutrally at at (rejection, cancellation, shutdown,
// a client-side relay error): no outcome, while its factual RX stays.
func (r *Reporter) Cancel(at time.Time) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled {
		return
	}
	r.flushLocked()
	r.settled = true
}

// Fail ends the flow with failure f at at. Every layer counts the failure
// (a failure before setup also as a setup failure). A target-scoped kind
// opens hard state only in the exact cell; a node-scoped kind, or any
// failure of targetless work, opens the node's episode in the global
// aggregate, which fences every cell depending on it. A zero Episode is a
// failure of its own.
func (r *Reporter) Fail(at time.Time, f Failure) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled {
		return
	}
	r.flushLocked()
	r.settled = true
	t := at.UnixNano()
	pre := r.setupAt == 0 || t < r.setupAt
	ep := f.Episode
	if ep == 0 {
		ep = EpisodeID(r.s.next())
	}
	node := !r.hasTarget || f.Kind.Provenance() == NodeScoped
	g := r.cells[0]
	held := g != nil && !g.dead
	if node && held {
		g.recordNode(t, ep, r.s.next())
	}
	r.live(func(i int, c *cell) {
		c.ev.add(failures, t, 1)
		if pre {
			c.ev.add(setupFails, t, 1)
		}
		// Children learn a node failure from the global aggregate's
		// record (live syncs them); with that cell evicted, directly.
		switch {
		case i == 2 && !node:
			c.targetFailure(t, ep)
		case i > 0 && node && !held:
			c.nodeFailure(t, ep)
		}
	})
}
