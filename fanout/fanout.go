// Package fanout carries one UDP association whose packets are routed one by
// one: each packet goes on the current plane to the outbound version its
// route resolves to, over a sub-link opened on demand for that version, and
// the replies of every sub-link merge back, each from its real source.
// Nothing a sub-link does ends the association; only Close does.
//
// No packet waits for another peer's sub-link. A sub-link is opened on a
// goroutine of the link's, off the send path, so an outbound that accepts a
// connection and never answers holds up only the packets routed to it. Those
// wait in a queue of the opening sub-link, flushed in order once it is open:
// at most MaxQueued (16) packets and MaxQueuedBytes (64 KiB of buffers). That
// covers what a client sends before its first answer (a QUIC handshake's
// first flight and a retransmission or two, a burst of DNS queries) while an
// open takes a proxy round trip or two; anything older than that would have
// been retransmitted by the application anyway, and a dead outbound cannot
// make an association hold more than MaxSubs × 64 KiB. Packets past the
// bound are dropped, as a lossy link drops them, and counted (Dropped). An
// open that fails drops its queue, counted, and the version is not opened
// again within the association for OpenBackoff (2 s), so a burst of packets
// to a dead outbound starts one open, not one per packet; 2 s is the first
// step of the spec's slot backoff schedule, short enough that a server that
// comes back is used again almost at once. An open is bounded by the link's
// life (Close cancels and waits for it) and by max(10 s, 4 × the default
// connect timeout), so none can hang for ever.
//
// A packet whose selection went through Score groups hands their attempts
// to the sub-link it opens, which reports on them for its whole life (its
// setup, bytes, first reply and end; score.go); a packet that opens no
// sub-link releases them.
package fanout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

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

	ctx    context.Context // the opens' contexts derive from it; cancelled by Close
	cancel context.CancelFunc

	// routing guards scratch and prefer, what routing a packet takes the
	// address of: as fields they cost no allocation per packet. Lock order:
	// routing, then mu.
	routing sync.Mutex
	scratch netx.Flow
	prefer  plane.OutboundID
	query   plane.Query // the selection of the packet being routed

	// mu guards subs, failed and closed, and the opening state of every
	// sub. It is never held across network I/O (an open, a send, a receive)
	// nor while taking the tracker's lock.
	mu     sync.Mutex
	subs   []*sub    // open and opening; most recently sent to (or opened) at the back
	failed []failure // versions whose last open failed, oldest first
	closed bool

	now func() time.Time // the clock of the open backoff

	report Reporter // hears how each sub-link's packet path fared; nil: none

	drops atomic.Uint64 // packets accepted and never handed to a sub-link

	batches func() netx.PacketBatch // set by PushPackets or PushBatches; guarded by mu
	poller  *netx.Poller            // set by DriveWith; guarded by mu
	polls   []*polled               // the sub-links the poller reads, until they end; guarded by mu
	recv    chan delivery           // sub-link readers hand datagrams to ReadPacket
	done    chan struct{}           // closed by Close
	opens   sync.WaitGroup          // one per open in progress
	readers sync.WaitGroup          // one reader per sub-link ever opened
}

var _ netx.PacketLink = (*Link)(nil)

// A Reporter hears how the packet path of a leaf fared, for its health: a
// sub-link that could not be opened, or failed while open, reports a
// failure; its first reply reports a success. A sub-link closed on purpose
// (eviction, a drain, the association's end, a node purge) reports
// nothing. It is called on the fan-out's goroutines and must not block.
type Reporter interface {
	PacketPath(node [16]byte, ok bool)
}

// NewReporting is New with a Reporter (nil: none).
func NewReporting(cell *plane.Cell, flow netx.Flow, tracker *track.Tracker, log *slog.Logger, r Reporter) *Link {
	l := New(cell, flow, tracker, log)
	l.report = r
	return l
}

// reportPath tells the Reporter how node's packet path fared.
func (l *Link) reportPath(node [16]byte, ok bool) {
	if l.report != nil && node != ([16]byte{}) {
		l.report.PacketPath(node, ok)
	}
}

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
		now:     time.Now,
		recv:    make(chan delivery),
		done:    make(chan struct{}),
	}
}

// WritePacket routes p on the current plane and sends it on the sub-link of
// the outbound version the route resolves to. When that sub-link is opening,
// or there is none and one starts opening now, p is queued for it instead
// (dropped past the queue's bound): WritePacket never waits for an open. A
// packet that cannot be opened for or sent is dropped, as a lossy link would
// drop it, and counted: WritePacket fails only once the link is closed
// (net.ErrClosed).
func (l *Link) WritePacket(p []byte, to netx.Addr) error {
	if l.sniffer != nil {
		return l.writeSniffed(p, to)
	}
	return l.write(p, to, sniffed{})
}

// write is WritePacket for a packet whose flow sniffed to sn.
func (l *Link) write(p []byte, to netx.Addr, sn sniffed) error {
	s, via, pl, to, err := l.take(p, to, sn)
	if s == nil {
		return err
	}
	if err := s.link.WritePacket(p, to); err != nil {
		return l.sendFailed(s, err, pl, p, to, sn)
	}
	l.delivered(s, via, len(p))
	return nil
}

// WritePackets is WritePacket for each of ps, in order, all toward to
// (netx.PacketBatchWriter): every packet is routed on its own, and a run
// of them that lands on one sub-link is handed to it in one go, which a
// UDP socket sends in one system call. It returns len(ps), or fewer with
// net.ErrClosed once the link is closed.
func (l *Link) WritePackets(ps [][]byte, to netx.Addr) (int, error) {
	if l.sniffer != nil {
		for i, p := range ps {
			if err := l.writeSniffed(p, to); err != nil {
				return i, err
			}
		}
		return len(ps), nil
	}
	var b batch
	for i, p := range ps {
		s, via, pl, t, err := l.take(p, to, sniffed{})
		if s == nil {
			if err != nil {
				l.flushRun(&b)
				return i, err
			}
			continue // queued, or dropped and counted
		}
		if s != b.s || via != b.via || pl != b.pl || t != b.to {
			l.flushRun(&b)
			b.s, b.via, b.pl, b.to = s, via, pl, t
		}
		if b.run == nil {
			b.run = make([][]byte, 0, len(ps)-i)
		}
		b.run = append(b.run, p)
	}
	l.flushRun(&b)
	return len(ps), nil
}

// batch is WritePackets' run of packets for one sub-link.
type batch struct {
	s   *sub
	via plane.OutboundID
	pl  *plane.Plane
	to  netx.Addr
	run [][]byte
}

// flushRun sends b's run on its sub-link and empties it: a packet whose send
// fails is handled as write handles it, and those after it go as write
// sends them, routed again.
func (l *Link) flushRun(b *batch) {
	if len(b.run) == 0 {
		return
	}
	n, err := b.s.link.WritePackets(b.run, b.to)
	var bytes int
	for _, p := range b.run[:n] {
		bytes += len(p)
	}
	if n > 0 {
		l.delivered(b.s, b.via, bytes)
	}
	if err != nil && n < len(b.run) {
		l.sendFailed(b.s, err, b.pl, b.run[n], b.to, sniffed{}) //nolint:errcheck // only a closed link fails, which the next write finds
		for _, p := range b.run[n+1:] {
			if l.write(p, b.to, sniffed{}) != nil {
				break
			}
		}
	}
	clear(b.run)
	b.run = b.run[:0]
}

// take routes p and claims the sub-link it goes on: that sub-link with
// the route target that picked it, the plane routed on and the
// destination it is sent to (the name behind a fake IP); or no sub-link
// when p is already handled (queued for an opening sub-link, or dropped
// and counted: err nil) or the link is closed (err net.ErrClosed).
func (l *Link) take(p []byte, to netx.Addr, sn sniffed) (*sub, plane.OutboundID, *plane.Plane, netx.Addr, error) {
	var none plane.OutboundID
	pl := l.cell.Load()
	if pl == nil {
		return nil, none, nil, to, l.dropped()
	}
	if pl.FakeIPs != nil {
		name, err := pl.Unfake(to)
		if err != nil {
			l.debug("udp fan-out: dropping a datagram: %v", err)
			return nil, none, nil, to, l.dropped()
		}
		to = name
	}
	r, ok := l.route(pl, to, sn)
	if !ok {
		return nil, none, nil, to, net.ErrClosed
	}
	if r.leaf == nil {
		return nil, none, nil, to, l.dropped()
	}
	s, v, evicted := l.claim(r, pl, p, to)
	if v != opened {
		// Only a sub-link this packet opens reports on its selection.
		releaseAttempts(&r.attempts)
	}
	if evicted != nil {
		evicted.Close()
	}
	switch v {
	case opened, queuedUp:
		return nil, none, nil, to, nil
	case queueFull:
		l.debug("udp fan-out: dropping a datagram for %s: %d are waiting for it to open", s.id, MaxQueued)
		return nil, none, nil, to, l.dropped()
	case backingOff:
		l.debug("udp fan-out: dropping a datagram for %s: opening it failed less than %v ago", r.leaf.ID(), OpenBackoff)
		return nil, none, nil, to, l.dropped()
	case linkClosed:
		return nil, none, nil, to, net.ErrClosed
	}
	return s, r.via, pl, to, nil
}

// sendFailed handles p's failed send on s, routed on pl: s is removed
// and closed, and p goes again on the plane now in force when a reload
// replaced pl since (the sub-link may be one it drained), else is dropped.
func (l *Link) sendFailed(s *sub, err error, pl *plane.Plane, p []byte, to netx.Addr, sn sniffed) error {
	if s.report != nil {
		s.report.sendFailed(err)
	}
	if l.remove(s) {
		s.link.Close()
		l.debug("udp fan-out: sending on %s failed: %v", s.id, err)
	}
	if l.cell.Load() != pl {
		return l.write(p, to, sn)
	}
	return l.dropped()
}

// delivered records bytes sent on s, picked by the route target via.
func (l *Link) delivered(s *sub, via plane.OutboundID, bytes int) {
	if s.report != nil {
		s.report.sentBytes(bytes)
	}
	l.sent(s, via)
}

// Dropped returns how many packets the link accepted and never handed to a
// sub-link: with no route, past an opening sub-link's queue, queued for an
// open that failed or was abandoned, routed to a version backing off after a
// failed open, or whose send failed.
func (l *Link) Dropped() uint64 { return l.drops.Load() }

// routed is where one packet goes.
type routed struct {
	flow netx.Flow        // the association's flow toward the packet's destination
	rule int              // the index of the rule that matched, or plane.Final
	via  plane.OutboundID // the route target: an outbound version or a balancer
	leaf *plane.Target    // the outbound version it resolved to; nil drops the packet
	// target is the route target itself, asked at the open whether it
	// prepares several leaves (plane.ColdPreparer).
	target *plane.Target
	// chain[:depth] is the selection chain the packet took (plane.Query),
	// copied by value so that routing allocates nothing; a sub-link opened
	// for the packet files it in the tracker.
	chain [plane.MaxGroupDepth + 2]string
	depth int
	// attempts are the Score attempts the selection made: a sub-link the
	// packet opens owns them, otherwise they are released (see score.go).
	attempts plane.Attempts
}

// path is the selection chain as a new slice, for the tracker to keep.
func (r *routed) path() []string { return append([]string(nil), r.chain[:r.depth]...) }

// sniffed is what the routed packet sniffed to.
func (r routed) sniffed() sniffed { return sniffed{r.flow.Protocol, r.flow.Sniffed} }

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
	r = routed{flow: l.scratch, rule: rule, via: target.ID(), target: target}
	var found bool
	if l.prefer, found, ok = l.preferred(r.via); !ok {
		return routed{}, false
	}
	l.query.Network, l.query.Family, l.query.Dst, l.query.Prefer = netx.UDP, netx.V4, to, nil
	if found {
		l.query.Prefer = &l.prefer
	}
	r.leaf = target.Resolve(&l.query)
	r.chain, r.depth = l.query.Chain, l.query.Depth
	if l.query.Attempts.Len() > 0 {
		r.attempts = l.query.Attempts
		l.query.Attempts.Reset()
		if r.leaf == nil {
			releaseAttempts(&r.attempts)
		}
	}
	return r, true
}

// Close closes every sub-link (ending their tracked flows), cancels every
// open in progress and waits for it, unblocks ReadPacket and waits for every
// reader. It is idempotent; the first call returns the sub-links' close
// errors joined.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	var open []*sub
	for _, s := range l.subs {
		if !s.opening {
			open = append(open, s)
		}
	}
	l.subs = nil
	l.mu.Unlock()

	l.cancel()
	close(l.done)
	var errs []error
	for _, s := range open {
		if err := s.link.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing sub-link %s: %w", s.id, err))
		}
	}
	l.opens.Wait()
	// The poller's readers end here, not on the poller's goroutine: Close
	// may run on it (an inbound evicting an association as it reads).
	l.mu.Lock()
	polls := slices.Clone(l.polls)
	l.mu.Unlock()
	for _, pr := range polls {
		pr.stop()
	}
	l.readers.Wait()
	return errors.Join(errs...)
}

// dropped counts a packet WritePacket did not send and is its answer: nil,
// as a lossy link drops a packet, or net.ErrClosed once the link is closed.
func (l *Link) dropped() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return net.ErrClosed
	}
	l.drops.Add(1)
	return nil
}

// debug logs the spec's text; it is formatted only when debug is enabled.
func (l *Link) debug(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf(format, args...))
	}
}
