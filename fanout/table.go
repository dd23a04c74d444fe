package fanout

import (
	"switchyard/plane"
	"switchyard/track"
)

// sub is one sub-link: the link open on one outbound version.
type sub struct {
	// id is the outbound version the link is open on, its key in the table.
	id plane.OutboundID
	// via is the route target that last sent on it: the same version, or the
	// balancer that picked it. Guarded by Link.mu.
	via  plane.OutboundID
	link *track.Link
	// ack is signalled by ReadPacket once it copied a datagram this
	// sub-link's reader handed over.
	ack chan struct{}
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

// find returns the sub-link open on id, or nil.
func (l *Link) find(id plane.OutboundID) *sub {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range l.subs {
		if s.id == id {
			return s
		}
	}
	return nil
}

// add puts s at the back of the table and starts its reader. It returns the
// sub-link to send on (s, or one another open put there first for the same
// version; nil once the link is closed) and the one evicted past MaxSubs,
// which the caller closes. The caller closes s when it is not returned.
func (l *Link) add(s *sub) (kept, evicted *sub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, nil
	}
	for _, o := range l.subs {
		if o.id == s.id {
			return o, nil
		}
	}
	l.subs = append(l.subs, s)
	if len(l.subs) > MaxSubs {
		evicted = l.subs[0]
		l.subs = append(l.subs[:0], l.subs[1:]...)
	}
	l.readers.Add(1)
	go l.read(s)
	return s, evicted
}

// remove takes s out of the table and reports whether it was there, so only
// one of the paths that can end a sub-link closes and logs it.
func (l *Link) remove(s *sub) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.subs {
		if o == s {
			l.subs = append(l.subs[:i], l.subs[i+1:]...)
			return true
		}
	}
	return false
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
