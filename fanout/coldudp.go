package fanout

import (
	"context"
	"time"

	"switchyard/netx"
	"switchyard/plane"
)

// dial opens the link of the sub-link r routed to, under the establishment
// of the plane it routed on. When the route target is a URLTest group with
// no measurement for the flow (plane.ColdPreparer), several of its leaves
// are prepared at once and r is updated to the winner, its leaf and chain;
// cold reports that, and that each candidate's observed failure was
// already reported against its node. The candidates dial speculatively
// and the winner comes back committed (plane.Plane.PreparePacket): the
// losers left no session behind, and the winner's session is its
// outbound's shared one before the first packet goes on raw. Otherwise
// r's leaf is dialed, after r's Score attempts are begun (rep; nil without
// attempts): a refused Begin is returned as a *beginRefusal and nothing is
// dialed. A cold preparation races leaves none of the attempts was made
// for: they are released.
func (l *Link) dial(ctx context.Context, r *routed, pl *plane.Plane) (raw netx.PacketLink, cold bool, rep *flowReport, err error) {
	q := plane.Query{Network: netx.UDP, Family: netx.V4, Dst: r.flow.Dst}
	cands := r.target.ColdCandidates(&q)
	releaseAttempts(&q.Attempts)
	if len(cands) > 0 {
		releaseAttempts(&r.attempts)
		c, raw, err := pl.PreparePacket(ctx, r.target, &q, cands, r.flow, func(leaf *plane.Target, phase netx.Phase, err error) {
			l.reportPath(leaf.Node(), false)
			l.reportPhase(leaf, phase, err)
			l.debug("udp fan-out: cold preparation through %s: opening %s failed: %v", r.via, leaf.ID(), err)
		})
		if err == nil {
			l.reportPhase(c.Leaf, netx.PhaseHandshake, nil)
			r.leaf = c.Leaf
			r.depth = copy(r.chain[:], c.Chain)
			l.debug("udp fan-out: cold preparation through %s chose %s among %d candidates", r.via, c.Leaf.ID(), len(cands))
		}
		return raw, true, nil, err
	}
	if rep, err = beginReport(&r.attempts, time.Now()); err != nil {
		return nil, false, nil, &beginRefusal{err}
	}
	est, dctx, cancel := pl.Begin(ctx)
	raw, err = r.leaf.DialPacket(dctx, r.flow)
	est.End()
	cancel()
	l.reportDial(ctx, r.leaf, est, err)
	return raw, false, rep, err
}

// adopt files s, opened for the route's first pick, under id, the version
// its cold preparation opened raw on: a new sub takes s's place in the
// table with its queue and its opener's context (s is left as it was for
// whoever still holds it), and later packets through the same route
// target prefer it (Query.Prefer). When the association already has a
// sub-link on id, raw is closed, that sub-link becomes the route target's
// and s's queued packets go on it (queued on it while it opens; past its
// bound, or when a send fails, dropped and counted); adopt then returns nil
// and the opener is done. A sub-link closed or evicted meanwhile is returned as
// it is, for the flush to close what was opened.
func (l *Link) adopt(s *sub, id plane.OutboundID, raw netx.PacketLink) *sub {
	l.mu.Lock()
	if l.closed || !l.has(s) {
		l.mu.Unlock()
		return s
	}
	for _, o := range l.subs {
		if o != s && o.id == id {
			l.detach(s)
			o.via = s.via
			q := s.take()
			if o.opening {
				for _, p := range q {
					if !o.enqueue(p.Payload(), p.Meta.to, p.Meta.sn) {
						l.drops.Add(1)
					}
					p.Release()
				}
				l.mu.Unlock()
				raw.Close()
				return nil
			}
			link := o.link
			l.mu.Unlock()
			raw.Close()
			for _, p := range q {
				if link.WritePacket(p.Payload(), p.Meta.to) != nil {
					l.drops.Add(1)
				}
				p.Release()
			}
			return nil
		}
	}
	n := &sub{id: id, via: s.via, ack: make(chan struct{}, 1), opening: true, cancel: s.cancel}
	n.queue, s.queue = s.queue, netx.HeldQueue[queuedMeta]{}
	for i, o := range l.subs {
		if o == s {
			l.subs[i] = n
			break
		}
	}
	l.mu.Unlock()
	return n
}
