package serve

import (
	"context"
	"net"
	"sync"

	"switchyard/netx"
)

// PacketLink returns a datagram link on which every datagram written is a
// DNS query, whatever address it is written to, and every datagram read is
// an answer, attributed to the address its query was written to: a client
// that asked 1.1.1.1:53 sees the reply come from 1.1.1.1:53.
//
// Each query is answered on a goroutine of the link's own. At most
// MaxInFlight queries are held at once, answered or not yet read; a
// datagram beyond that is dropped (and counted), as an overloaded server
// drops, and the client retries. Bad input never ends the link: a
// malformed query is answered FORMERR or dropped, and WritePacket fails
// only once the link is closed. Close cancels the queries in progress,
// waits for their goroutines and unblocks ReadPacket and WaitPacket.
//
// The link lives until Close, independently of any dial context.
func (s *Service) PacketLink() netx.PacketLink {
	ctx, cancel := context.WithCancel(context.Background())
	return &link{
		s:       s,
		ctx:     ctx,
		cancel:  cancel,
		answers: make(chan answer, s.maxInFlight),
		done:    make(chan struct{}),
	}
}

// link is the service's PacketLink.
type link struct {
	s      *Service
	ctx    context.Context // the queries' contexts derive from it
	cancel context.CancelFunc

	// answers holds answers until ReadPacket takes them. Its capacity is
	// MaxInFlight and each query in flight sends at most one, so a send
	// never blocks.
	answers chan answer
	done    chan struct{} // closed by Close

	mu       sync.Mutex // guards the fields below
	closed   bool
	inFlight int            // queries taken and not yet read or dropped
	queries  sync.WaitGroup // the query goroutines; Add under mu

	// pending is the answer WaitPacket took, when has, and ReadPacket is
	// to return; only the reader touches them.
	pending answer
	has     bool
}

// answer is a reply and the address its query was written to.
type answer struct {
	r  reply
	to netx.Addr
}

var _ netx.PacketWaiter = (*link)(nil)

// WritePacket takes p as a query to answer as if from to. It returns nil
// for every datagram until the link is closed (net.ErrClosed), whether the
// query is answered or dropped.
func (l *link) WritePacket(p []byte, to netx.Addr) error {
	l.s.stats.queries.Add(1)
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return net.ErrClosed
	}
	if l.inFlight >= l.s.maxInFlight {
		l.mu.Unlock()
		l.s.stats.dropped.Add(1)
		if l.s.debugOn() {
			l.s.log.Debug("dns service: dropping a query: too many in flight", "to", to.String(), "max", l.s.maxInFlight)
		}
		return nil
	}
	l.inFlight++
	l.queries.Add(1)
	l.mu.Unlock()

	// Only the first MaxQuerySize+1 bytes matter: a longer query is
	// answered FORMERR from its header.
	n := min(len(p), MaxQuerySize+1)
	bp := netx.GetBuf(n)
	q := (*bp)[:n]
	copy(q, p)
	go l.serve(bp, q, to)
	return nil
}

// serve answers one query and queues the answer for ReadPacket.
func (l *link) serve(bp *[]byte, q []byte, to netx.Addr) {
	defer l.queries.Done()
	r, why := l.s.answer(l.ctx, q, netx.UDP)
	netx.PutBuf(bp)
	if why != "" {
		if l.s.debugOn() {
			l.s.log.Debug("dns service: dropping a message", "to", to.String(), "why", why)
		}
		l.release()
		return
	}
	select {
	case <-l.done:
		r.release()
		l.s.stats.dropped.Add(1)
		l.release()
	default:
		l.answers <- answer{r: r, to: to} // never blocks: see answers
	}
}

// release ends one query's hold on the in-flight bound.
func (l *link) release() {
	l.mu.Lock()
	l.inFlight--
	l.mu.Unlock()
}

// WaitPacket blocks until an answer is ready and returns its size
// (netx.PacketWaiter), or net.ErrClosed once the link is closed.
func (l *link) WaitPacket() (int, error) {
	if !l.has {
		select {
		case <-l.done:
			return 0, net.ErrClosed
		case l.pending = <-l.answers:
			l.has = true
		}
	}
	return len(l.pending.r.b), nil
}

// ReadPacket returns the next answer, attributed to the address its query
// was written to. An answer longer than p is truncated. It fails only
// once the link is closed (net.ErrClosed).
func (l *link) ReadPacket(p []byte) (int, netx.Addr, error) {
	select {
	case <-l.done:
		return 0, netx.Addr{}, net.ErrClosed
	default:
	}
	a := l.pending
	if l.has {
		l.pending, l.has = answer{}, false
	} else {
		select {
		case <-l.done:
			return 0, netx.Addr{}, net.ErrClosed
		case a = <-l.answers:
		}
	}
	n := copy(p, a.r.b)
	a.r.release()
	l.release()
	return n, a.to, nil
}

// Close cancels the queries in progress, waits for their goroutines and
// drops the answers not read. It is idempotent.
func (l *link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	close(l.done)
	l.queries.Wait()
	for {
		select {
		case a := <-l.answers:
			a.r.release()
			l.s.stats.dropped.Add(1)
		default:
			return nil
		}
	}
}
