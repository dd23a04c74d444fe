package fanout

import (
	"net"
	"slices"
	"sync"

	"switchyard/netx"
)

// A fan-out driven by a Poller (DriveWith) has no reader goroutine for a
// sub-link whose link can be read without waiting (netx.PollableLink, a
// direct socket): the poller's goroutine takes its datagrams whenever one
// of its sockets is readable, into the batch PushBatches opens, and
// flushes the batch when the socket has no more waiting or after
// pollBudget datagrams (the poller then comes back to it, after the other
// ready descriptors). Every other sub-link keeps its goroutine.

// pollBudget bounds the datagrams one sub-link's socket hands on in one
// turn of the poller, so a busy one leaves the others their turn: as many
// as a reply batch joins into one packet (inbound/tun's segMax).
const pollBudget = 64

var _ netx.PollDriven = (*Link)(nil)

// DriveWith makes p read the sub-links that allow it, instead of a
// goroutine each (netx.PollDriven). Call it after PushBatches, before the
// first WritePacket.
func (l *Link) DriveWith(p *netx.Poller) {
	l.mu.Lock()
	l.poller = p
	l.mu.Unlock()
}

// polled is one sub-link the poller reads: a watch per socket, one batch.
type polled struct {
	l     *Link
	s     *sub
	batch netx.PacketBatch // used on the poller's goroutine only

	mu      sync.Mutex
	watches []*netx.Watch // guarded by mu
	stopped bool          // guarded by mu: no watch is to be added

	once sync.Once // the reader's end
}

// poll makes p read s, open and flushed already, and reports whether it
// does; when it does not, s's link cannot be read that way.
func (l *Link) poll(s *sub, open func() netx.PacketBatch, p *netx.Poller) bool {
	pr := &polled{l: l, s: s}
	srcs := netx.PollSourcesOf(s.link, pr.kick)
	if len(srcs) == 0 {
		return false
	}
	pr.batch = open()
	l.mu.Lock()
	if l.closed { // Close took its list of polled sub-links already
		l.mu.Unlock()
		pr.end(net.ErrClosed)
		return true
	}
	l.polls = append(l.polls, pr)
	l.mu.Unlock()
	for _, src := range srcs {
		w, err := p.Watch(src.Conn, pr.ready(src.Read))
		if err != nil {
			pr.halt()
			pr.end(err) // the poller closed: the association is ending
			return true
		}
		pr.mu.Lock()
		if pr.stopped {
			pr.mu.Unlock()
			w.Stop()
			return true
		}
		pr.watches = append(pr.watches, w)
		pr.mu.Unlock()
	}
	// What arrived before the watches, and a close that came before them.
	pr.kick()
	return true
}

// kick has the poller read every socket once more: the link closed, and a
// closed socket is no longer reported.
func (pr *polled) kick() {
	pr.mu.Lock()
	ws := pr.watches
	pr.mu.Unlock()
	for _, w := range ws {
		w.Kick()
	}
}

// ready is a socket's turn on the poller: it hands on what is waiting
// and, once the read fails, ends the sub-link's reader.
func (pr *polled) ready(read func([]byte) (int, netx.Addr, error)) func(buf []byte) bool {
	return func(buf []byte) bool {
		l, s := pr.l, pr.s
		defer pr.batch.Flush()
		for range pollBudget {
			n, from, err := read(buf)
			if err == netx.ErrWouldBlock {
				return true
			}
			if err != nil {
				pr.end(err)
				return false
			}
			l.replied(s)
			pr.batch.Add(buf[:n], from)
			if s.report != nil {
				s.report.deliveredBytes(n)
			}
		}
		return true
	}
}

// stop ends the watches and the reader.
func (pr *polled) stop() {
	pr.halt()
	pr.end(net.ErrClosed)
}

// halt ends the watches, waiting for a turn in progress.
func (pr *polled) halt() {
	pr.mu.Lock()
	pr.stopped = true
	ws := pr.watches
	pr.mu.Unlock()
	for _, w := range ws {
		w.Stop()
	}
}

// end is the sub-link reader's end, once: as a goroutine reader's failed
// read ends it.
func (pr *polled) end(err error) {
	pr.once.Do(func() {
		l := pr.l
		l.readFailed(pr.s, err)
		l.mu.Lock()
		if i := slices.Index(l.polls, pr); i >= 0 {
			l.polls = slices.Delete(l.polls, i, i+1)
		}
		l.mu.Unlock()
		l.readers.Done()
	})
}
