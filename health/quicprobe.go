package health

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
)

// QUICProber is a Prober that also performs the Score QUIC evidence
// handshake: a real TLS-in-QUIC handshake with ALPN h3 through the node's
// packet path toward url (an https URL: its host and port, SNI the host,
// the certificate verified), closed once complete. The Result's RTT is the
// handshake's duration, excluding the opening of the packet path.
type QUICProber interface {
	Prober
	QUIC(ctx context.Context, url string) (Result, error)
}

// validHTTPS reports whether raw is an https URL the QUIC probe can aim
// at: no spaces, controls or non-ASCII bytes (the probe sends URLs as
// written), the https scheme and a host.
func validHTTPS(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return false
		}
	}
	u, err := url.Parse(raw)
	return err == nil && strings.EqualFold(u.Scheme, "https") && u.Hostname() != "" && u.Opaque == ""
}

// SetScoreLeaves publishes the Score leaves: the nodes some Score group
// can select. Their UDP rounds carry the QUIC evidence handshake; others
// get none. The set replaces the previous one (the caller sets it again at
// every reload); the runner reads the published snapshot without a lock.
func (e *Engine) SetScoreLeaves(ids []NodeID) {
	set := make(map[NodeID]struct{}, len(ids))
	for _, id := range ids {
		set[id] = struct{}{}
	}
	e.score.Store(&set)
}

// ScoreLeaf reports whether id is in the published Score leaf set.
func (e *Engine) ScoreLeaf(id NodeID) bool {
	_, ok := (*e.score.Load())[id]
	return ok
}

// quicProber is n's QUIC prober when its UDP rounds carry the handshake:
// a Score leaf, a first TCP check URL that is https, a prober that can.
func (e *Engine) quicProber(n *node, m *meta) QUICProber {
	if e.quicURL == "" || !e.ScoreLeaf(n.id) {
		return nil
	}
	q, _ := m.prober.(QUICProber)
	return q
}

// udpRound is one probe of a node's UDP path: the DNS query and, for a
// Score leaf, the QUIC handshake, each a probe of its own (a token of the
// probe bound each, run side by side), recorded together by whichever
// ends last.
type udpRound struct {
	e      *Engine
	n      *node
	forced bool
	done   func() // the path's probe ended (nil: nothing to do)
	left   atomic.Int32
	// Written by their part before its finish, read by the last finish.
	dns, quic udpPart
}

// udpPart is one measurement of a round; ran is false when it did not run
// or was cancelled (it then says nothing about the node).
type udpPart struct {
	ran bool
	res Result
	err error
}

// submitUDP probes n's UDP path: the DNS query and, for a Score leaf, the
// QUIC handshake. done is called once both ended (or were not started).
func (e *Engine) submitUDP(ctx context.Context, wg *sync.WaitGroup, n *node, forced bool, done func()) {
	m := n.meta.Load()
	if m.prober == nil {
		if done != nil {
			done()
		}
		return
	}
	r := &udpRound{e: e, n: n, forced: forced, done: done}
	q := e.quicProber(n, m)
	if q == nil {
		r.left.Store(1)
	} else {
		r.left.Store(2)
	}
	if !e.submit(ctx, wg, func(ctx context.Context) { r.runDNS(ctx, m.prober); r.finish() }) {
		r.finish()
	}
	if q != nil && !e.submit(ctx, wg, func(ctx context.Context) { r.runQUIC(ctx, q); r.finish() }) {
		r.finish()
	}
}

func (r *udpRound) runDNS(ctx context.Context, p Prober) {
	e := r.e
	pctx, cancel := e.withTimeout(ctx, e.timeout)
	res, err := p.UDP(pctx, e.dns)
	cancel()
	if ctx.Err() != nil {
		return // cancelled: the result says nothing about the node
	}
	e.probed(r.n, udpPath, res, err)
	r.dns = udpPart{ran: true, res: res, err: err}
}

// runQUIC performs the handshake within the same per-probe budget as the
// DNS query, and hands its outcome to OnScoreQUIC.
func (r *udpRound) runQUIC(ctx context.Context, q QUICProber) {
	e, n := r.e, r.n
	start := e.clock.Now()
	pctx, cancel := e.withTimeout(ctx, e.timeout)
	res, err := q.QUIC(pctx, e.quicURL)
	cancel()
	if ctx.Err() != nil {
		return
	}
	r.quic = udpPart{ran: true, res: res, err: err}
	if err != nil {
		e.log.Debug(fmt.Sprintf("node %s: the Score QUIC handshake failed: %v", n.name(), err))
	}
	if e.onQUIC == nil || n.removed.Load() {
		return
	}
	if err != nil {
		e.onQUIC(n.id, start, 0, false)
		return
	}
	// It started its duration ago, not before the probe did (a clock
	// other than the wall clock may not have moved).
	d := rtt(res)
	started := e.clock.Now().Add(-d)
	if started.Before(start) {
		started = start
	}
	e.onQUIC(n.id, started, d, true)
}

// finish ends one part; the last records the round and calls done.
func (r *udpRound) finish() {
	if r.left.Add(-1) != 0 {
		return
	}
	if r.dns.ran {
		var quic *Result
		if r.quic.ran && r.quic.err == nil {
			quic = &r.quic.res
		}
		r.e.recordUDP(r.n, r.dns.res, r.dns.err, r.forced, quic)
	}
	if r.done != nil {
		r.done()
	}
}
