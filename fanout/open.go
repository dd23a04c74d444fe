package fanout

import (
	"context"
	"errors"
	"time"

	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// Bounds of the packets that wait for a sub-link to open; see the package
// documentation for the reasons.
const (
	// MaxQueued is how many packets one opening sub-link holds.
	MaxQueued = 16
	// MaxQueuedBytes is the buffer memory one opening sub-link holds: sixteen
	// MTU-sized packets (in 2 KiB buffers) fit, and so does one datagram of
	// the largest size (64 KiB and room for a header).
	MaxQueuedBytes = netx.MaxBuf
)

// OpenBackoff is how long a version whose open failed is not opened again
// within one association: packets routed to it meanwhile are dropped.
const OpenBackoff = 2 * time.Second

// queued is one packet waiting for its sub-link to open.
type queued = netx.Held[queuedMeta]

// queuedMeta is what a queued packet keeps: its destination, and what it
// sniffed to, should it be routed again.
type queuedMeta struct {
	to netx.Addr
	sn sniffed
}

// enqueue copies p onto s's queue and reports whether it fit within
// MaxQueued and MaxQueuedBytes. Callers hold Link.mu.
func (s *sub) enqueue(p []byte, to netx.Addr, sn sniffed) bool {
	return s.queue.Push(p, queuedMeta{to, sn}, MaxQueued, MaxQueuedBytes)
}

// take empties s's queue and returns what it held. Callers hold Link.mu.
func (s *sub) take() []queued { return s.queue.Take() }

// discard drops queued packets, counted, and returns their buffers.
func (l *Link) discard(q []queued) {
	for _, p := range q {
		p.Release()
	}
	l.drops.Add(uint64(len(q)))
}

// open runs on its own goroutine, owned by the link: it dials s's version
// with the flow toward the packet that opened it, under the establishment
// of the plane that packet routed on (its deadline and dial admission), then
// flushes s's queue in order and hands s to the table, where senders use it
// directly. When the open fails, the queue is dropped and the version is not
// opened again for OpenBackoff; when a reload overtook it (the version was
// retired, or drained while it opened), the queued packets are routed again
// on the plane now published instead. An open evicted from the table or
// abandoned by Close closes what it opened and drops its queue.
func (l *Link) open(ctx context.Context, s *sub, r routed, pl *plane.Plane) {
	defer l.opens.Done()
	defer s.cancel()
	f := r.flow
	raw, cold, rep, err := l.dial(ctx, &r, pl)
	if refused := (*beginRefusal)(nil); errors.As(err, &refused) {
		// The plan went stale before anything was dialed: the sub-link is
		// refused, neither failed nor backed off; the next packet routes
		// again.
		l.mu.Lock()
		l.detach(s)
		q := s.take()
		l.mu.Unlock()
		l.discard(q)
		l.debug("udp fan-out: not opening %s: %v", s.id, err)
		return
	}
	if rep != nil && err != nil {
		if ctx.Err() != nil || plane.Reloaded(err) {
			rep.cancel()
		} else {
			rep.fail(err)
		}
	}
	if err != nil && plane.Reloaded(err) && ctx.Err() == nil && l.cell.Load() != pl {
		l.reroute(s)
		return
	}
	if err != nil && ctx.Err() == nil && !plane.Reloaded(err) && !cold {
		l.reportPath(r.leaf.Node(), false)
	}
	if err != nil {
		l.mu.Lock()
		own := !l.closed && l.detach(s)
		if own {
			l.remember(s.id, l.now())
		}
		q := s.take()
		l.mu.Unlock()
		l.discard(q)
		if own {
			l.debug("udp fan-out: opening %s failed: %v", s.id, err)
		}
		if len(q) > 0 {
			l.debug("udp fan-out: dropped %d datagrams waiting for %s", len(q), s.id)
		}
		return
	}
	if cold && r.leaf.ID() != s.id {
		if s = l.adopt(s, r.leaf.ID(), raw); s == nil {
			return
		}
	}
	meta := track.Meta{
		Network:     netx.UDP,
		Inbound:     f.Inbound,
		User:        f.User,
		Source:      f.Src,
		Destination: f.Dst,
		Sniffed:     f.Sniffed,
		Rule:        plane.RuleName(r.rule),
		Outbound:    s.id.String(),
		Epoch:       pl.Epoch,
		Session:     f.Session,
		Chain:       r.path(), // once per sub-link, never per packet
	}
	s.node = r.leaf.Node()
	if rep != nil {
		rep.setup(time.Now())
		s.report = rep
	}
	pl.Hit(r.rule)
	l.flush(s, l.tracker.Link(meta, raw), pl)
}

// reroute takes s out of the table and sends its queued packets again, each
// routed on the plane now in force as WritePacket routes it.
func (l *Link) reroute(s *sub) {
	l.mu.Lock()
	l.detach(s)
	q := s.take()
	l.mu.Unlock()
	l.resend(q)
}

// resend sends queued packets again, each routed as WritePacket routes it,
// and returns their buffers.
func (l *Link) resend(q []queued) {
	for _, p := range q {
		l.write(p.Payload(), p.Meta.to, p.Meta.sn)
		p.Release()
	}
}

// flush sends s's queue on link in order, batch by batch (packets queued
// meanwhile wait for the next batch, so none overtakes an earlier one), and
// once the queue is empty marks s open and starts its reader. No lock is held
// while sending.
func (l *Link) flush(s *sub, link *track.Link, pl *plane.Plane) {
	for {
		l.mu.Lock()
		if l.closed || !l.has(s) {
			q := s.take()
			l.mu.Unlock()
			if s.report != nil {
				s.report.retire()
			}
			link.Close()
			l.discard(q)
			return
		}
		s.link = link
		q := s.take()
		if len(q) == 0 {
			s.opening = false
			l.readers.Add(1)
			open, poller := l.batches, l.poller
			l.mu.Unlock()
			if poller == nil || open == nil || !l.poll(s, open, poller) {
				go l.read(s, open)
			}
			return
		}
		l.mu.Unlock()
		for i, p := range q {
			if err := link.WritePacket(p.Payload(), p.Meta.to); err != nil {
				if s.report != nil {
					s.report.sendFailed(err)
				}
				l.mu.Lock()
				removed := l.detach(s)
				rest := s.take()
				l.mu.Unlock()
				link.Close()
				if removed {
					l.debug("udp fan-out: sending on %s failed: %v", s.id, err)
				}
				if l.cell.Load() != pl {
					// A reload since the packets routed may have drained
					// the version: they go again, on the plane in force.
					l.resend(q[i:])
					l.resend(rest)
					return
				}
				l.discard(q[i:])
				l.discard(rest)
				return
			}
			if s.report != nil {
				s.report.sentBytes(len(p.Payload()))
			}
			p.Release()
		}
	}
}

// failure is a version whose open failed, not opened again before until.
type failure struct {
	id    plane.OutboundID
	until time.Time
}

// remember records that id's open failed at now. The memory keeps at most
// MaxSubs versions, dropping the oldest. Callers hold mu.
func (l *Link) remember(id plane.OutboundID, now time.Time) {
	kept := l.failed[:0]
	for _, f := range l.failed {
		if f.id != id && now.Before(f.until) {
			kept = append(kept, f)
		}
	}
	if len(kept) == MaxSubs {
		kept = append(kept[:0], kept[1:]...)
	}
	l.failed = append(kept, failure{id: id, until: now.Add(OpenBackoff)})
}

// backingOff reports whether id's open failed less than OpenBackoff before
// now. Callers hold mu.
func (l *Link) backingOff(id plane.OutboundID, now time.Time) bool {
	for _, f := range l.failed {
		if f.id == id {
			return now.Before(f.until)
		}
	}
	return false
}
