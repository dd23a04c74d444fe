package fanout

import (
	"context"
	"sync/atomic"

	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// sub is one sub-link: the link on one outbound version, open or opening.
type sub struct {
	// id is the outbound version the link is open on, its key in the table.
	id plane.OutboundID
	// via is the route target that last sent (or queued) on it: the same
	// version, or the balancer that picked it. Guarded by Link.mu.
	via plane.OutboundID
	// link is nil until the open succeeds. While opening is set it belongs
	// to the opener; afterwards to the table. Written under Link.mu before
	// opening is cleared, so a sender that saw opening false may use it.
	link *track.Link
	// ack is signalled by ReadPacket once it copied a datagram this
	// sub-link's reader handed over.
	ack chan struct{}

	// opening is set from the sub-link's creation until its opener has
	// flushed the queue: while it is, packets for it are queued. Guarded by
	// Link.mu, as is queue.
	opening bool
	queue   netx.HeldQueue[queuedMeta]
	// cancel ends the open; eviction and Close call it.
	cancel context.CancelFunc
	// node is the node identity of the leaf the sub-link is open on (set
	// by its opener); replied is set by its reader at the first reply.
	node    [16]byte
	replied atomic.Bool
	// report is the Score reports of the selection that opened the
	// sub-link (nil: none), set by its opener before it is open.
	report *flowReport
}

// verdict is what claim decided for one packet.
type verdict uint8

const (
	sendNow    verdict = iota // send it on the returned, open sub-link
	opened                    // first in the queue of a sub-link it starts opening
	queuedUp                  // queued on a sub-link being opened
	queueFull                 // dropped: the opening sub-link's queue is full
	backingOff                // dropped: the version's last open failed moments ago
	linkClosed                // dropped: the link is closed
)

// claim decides, in one step under mu, what becomes of a packet routed to
// r.leaf: when the version's sub-link is open it is returned to send on;
// when it is opening the packet is queued on it (dropped past the bound);
// when there is none, one starts opening on a goroutine of the link's, with
// the packet first in its queue, unless the version's last open failed
// moments ago. A new sub-link joins the table at the back; the one evicted
// past MaxSubs, when it was open, is returned for the caller to close.
func (l *Link) claim(r routed, pl *plane.Plane, p []byte, to netx.Addr) (s *sub, v verdict, evicted *track.Link) {
	id := r.leaf.ID()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, linkClosed, nil
	}
	for i, o := range l.subs {
		if o.id != id {
			continue
		}
		if !o.opening {
			return o, sendNow, nil
		}
		if !o.enqueue(p, to, r.sniffed()) {
			return o, queueFull, nil
		}
		// A queued packet counts as sent for the LRU order and the balancer's
		// preference: it will be sent once the sub-link is open.
		copy(l.subs[i:], l.subs[i+1:])
		l.subs[len(l.subs)-1] = o
		o.via = r.via
		return o, queuedUp, nil
	}
	now := l.now()
	if l.backingOff(id, now) {
		return nil, backingOff, nil
	}
	ctx, cancel := context.WithCancel(l.ctx)
	s = &sub{id: id, via: r.via, ack: make(chan struct{}, 1), opening: true, cancel: cancel}
	s.enqueue(p, to, r.sniffed())
	l.subs = append(l.subs, s)
	if len(l.subs) > MaxSubs {
		old := l.subs[0]
		l.subs = append(l.subs[:0], l.subs[1:]...)
		if old.opening {
			old.cancel() // its opener closes what it opened and drops its queue
		} else {
			evicted = old.link
		}
	}
	l.opens.Add(1)
	go l.open(ctx, s, r, pl)
	return s, opened, evicted
}

// preferred returns the version of the most recently used sub-link that the
// route target via led to (found false when there is none); open is false
// once the link is closed.
func (l *Link) preferred(via plane.OutboundID) (prefer plane.OutboundID, found, open bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return plane.OutboundID{}, false, false
	}
	for i := len(l.subs) - 1; i >= 0; i-- {
		if l.subs[i].via == via {
			return l.subs[i].id, true, true
		}
	}
	return plane.OutboundID{}, false, true
}

// detach takes s out of the table and reports whether it was there. Callers
// hold mu.
func (l *Link) detach(s *sub) bool {
	for i, o := range l.subs {
		if o == s {
			l.subs = append(l.subs[:i], l.subs[i+1:]...)
			return true
		}
	}
	return false
}

// has reports whether s is in the table. Callers hold mu.
func (l *Link) has(s *sub) bool {
	for _, o := range l.subs {
		if o == s {
			return true
		}
	}
	return false
}

// remove takes s out of the table and reports whether it was there, so only
// one of the paths that can end a sub-link closes and logs it.
func (l *Link) remove(s *sub) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.detach(s)
}

// sent moves s to the back after a successful send and records the route
// target that sent on it, so the next packet routed there prefers it.
func (l *Link) sent(s *sub, via plane.OutboundID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.subs {
		if o == s {
			copy(l.subs[i:], l.subs[i+1:])
			l.subs[len(l.subs)-1] = s
			s.via = via
			return
		}
	}
}
