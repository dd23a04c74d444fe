// Package fanout carries one UDP association whose packets are routed one by
// one: each packet goes on the current plane to the outbound version its
// route resolves to, over a sub-link opened on demand for that version, and
// the replies of every sub-link merge back, each from its real source.
// Nothing a sub-link does ends the association; only Close does.
package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// MaxSubs is the number of sub-links one association keeps open; past it the
// least recently sent to is closed.
const MaxSubs = 64

// Link is one UDP association. WritePacket, ReadPacket and Close may each be
// called from their own goroutine.
type Link struct {
	cell    *plane.Cell
	flow    netx.Flow
	tracker *track.Tracker
	log     *slog.Logger
	sniffer *sniffer // nil unless the inbound sniffs (flow.SniffPackets)

	ctx    context.Context // bounds sub-link opens; cancelled by Close
	cancel context.CancelFunc

	// routing guards scratch and prefer, what routing a packet takes the
	// address of: as fields they cost no allocation per packet. Lock order:
	// routing, then mu.
	routing sync.Mutex
	scratch netx.Flow
	prefer  plane.OutboundID

	// mu guards subs and closed. It is never held across network I/O (an
	// open, a send, a receive) nor while taking the tracker's lock.
	mu     sync.Mutex
	subs   []*sub // most recently sent to (or opened) at the back
	closed bool

	recv    chan delivery  // sub-link readers hand datagrams to ReadPacket
	done    chan struct{}  // closed by Close
	readers sync.WaitGroup // one reader per sub-link ever opened
}

var _ netx.PacketLink = (*Link)(nil)

// New returns the association's link. flow is the association (Network UDP,
// Src, Inbound, User); every packet routes as flow.Toward(its destination),
// with what the packet sniffs to when flow.SniffPackets is set. log may be
// nil.
func New(cell *plane.Cell, flow netx.Flow, tracker *track.Tracker, log *slog.Logger) *Link {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var sn *sniffer
	if flow.SniffPackets {
		sn = newSniffer()
	}
	return &Link{
		sniffer: sn,
		cell:    cell,
		flow:    flow,
		tracker: tracker,
		log:     log,
		ctx:     ctx,
		cancel:  cancel,
		recv:    make(chan delivery),
		done:    make(chan struct{}),
	}
}

// WritePacket routes p on the current plane and sends it on the sub-link of
// the outbound version the route resolves to, opening that sub-link first
// when there is none. A packet that cannot be opened for or sent is dropped,
// as a lossy link would drop it: WritePacket fails only once the link is
// closed (net.ErrClosed).
func (l *Link) WritePacket(p []byte, to netx.Addr) error {
	if l.sniffer != nil {
		return l.writeSniffed(p, to)
	}
	return l.write(p, to, sniffed{})
}

// write is WritePacket for a packet whose flow sniffed to sn.
func (l *Link) write(p []byte, to netx.Addr, sn sniffed) error {
	pl := l.cell.Load()
	if pl == nil {
		return l.dropped()
	}
	r, ok := l.route(pl, to, sn)
	if !ok {
		return net.ErrClosed
	}
	if r.leaf == nil {
		return l.dropped()
	}
	s := l.find(r.leaf.ID())
	if s == nil {
		s = l.open(r, pl.Epoch)
		if s == nil {
			return l.dropped()
		}
	}
	if err := s.link.WritePacket(p, to); err != nil {
		if l.remove(s) {
			s.link.Close()
			l.debug("udp fan-out: sending on %s failed: %v", s.id, err)
		}
		return l.dropped()
	}
	l.sent(s, r.via)
	return nil
}

// routed is where one packet goes.
type routed struct {
	flow netx.Flow        // the association's flow toward the packet's destination
	rule int              // the index of the rule that matched, or plane.Final
	via  plane.OutboundID // the route target: an outbound version or a balancer
	leaf *plane.Target    // the outbound version it resolved to; nil drops the packet
}

// route routes the packet toward to, which sniffed to s, on pl and resolves
// the route target, preferring the version of the sub-link that target led
// to most recently. ok is false once the link is closed.
func (l *Link) route(pl *plane.Plane, to netx.Addr, s sniffed) (r routed, ok bool) {
	l.routing.Lock()
	defer l.routing.Unlock()
	l.scratch = l.flow.Toward(to)
	l.scratch.Protocol, l.scratch.Sniffed = s.protocol, s.domain
	target, rule := pl.Route(&l.scratch)
	if target == nil {
		return routed{}, true
	}
	r = routed{flow: l.scratch, rule: rule, via: target.ID()}
	var found bool
	if l.prefer, found, ok = l.preferred(r.via); !ok {
		return routed{}, false
	}
	if found {
		r.leaf = target.Resolve(&l.prefer)
	} else {
		r.leaf = target.Resolve(nil)
	}
	return r, true
}

// open dials a sub-link on r.leaf with the flow toward the packet that opens
// it, tracks it as routed by r.rule on the plane of epoch and adds it to the
// table. It returns nil when the open failed (logged) or the link was closed
// meanwhile.
func (l *Link) open(r routed, epoch uint64) *sub {
	id, f := r.leaf.ID(), r.flow
	raw, err := r.leaf.DialPacket(l.ctx, f)
	if err != nil {
		if l.ctx.Err() == nil {
			l.debug("udp fan-out: opening %s failed: %v", id, err)
		}
		return nil
	}
	meta := track.Meta{
		Network:     netx.UDP,
		Inbound:     f.Inbound,
		User:        f.User,
		Source:      f.Src,
		Destination: f.Dst,
		Sniffed:     f.Sniffed,
		Rule:        plane.RuleName(r.rule),
		Outbound:    id.String(),
		Epoch:       epoch,
	}
	s := &sub{id: id, via: r.via, link: l.tracker.Link(meta, raw), ack: make(chan struct{}, 1)}
	kept, evicted := l.add(s)
	if kept != s {
		s.link.Close()
	}
	if evicted != nil {
		evicted.link.Close()
	}
	return kept
}

// Close closes every sub-link (ending their tracked flows), abandons any
// open in progress, unblocks ReadPacket and waits for every reader. It is
// idempotent; the first call returns the sub-links' close errors joined.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	subs := l.subs
	l.subs = nil
	l.mu.Unlock()

	l.cancel()
	close(l.done)
	var errs []error
	for _, s := range subs {
		if err := s.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing sub-link %s: %w", s.id, err))
		}
	}
	l.readers.Wait()
	return errors.Join(errs...)
}

// dropped is WritePacket's answer for a packet it did not send: nil, as a
// lossy link drops a packet, or net.ErrClosed once the link is closed.
func (l *Link) dropped() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	return nil
}

// debug logs the spec's text; it is formatted only when debug is enabled.
func (l *Link) debug(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf(format, args...))
	}
}
