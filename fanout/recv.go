package fanout

import (
	"errors"
	"net"

	"switchyard/netx"
)

// delivery is one datagram a reader hands to ReadPacket. buf belongs to the
// reader, which reuses it only after ReadPacket signals ack.
type delivery struct {
	buf  []byte
	from netx.Addr
	ack  chan<- struct{}
}

var (
	_ netx.PacketPusher = (*Link)(nil)
	_ netx.BatchPusher  = (*Link)(nil)
)

// PushPackets makes every sub-link's reader hand its datagrams to deliver
// itself instead of queueing them for ReadPacket (netx.PacketPusher). Call
// it before the first WritePacket.
func (l *Link) PushPackets(deliver func(p []byte, from netx.Addr)) {
	b := pushEach(deliver)
	l.PushBatches(func() netx.PacketBatch { return b })
}

// pushEach is the batch of PushPackets: it hands on each datagram as it
// comes.
type pushEach func(p []byte, from netx.Addr)

func (f pushEach) Add(p []byte, from netx.Addr) { f(p, from) }
func (pushEach) Flush()                         {}

// PushBatches makes every sub-link's reader open a batch and hand its
// datagrams to it instead of queueing them for ReadPacket
// (netx.BatchPusher). A reader flushes its batch whenever its sub-link
// has no datagram waiting (netx.IdleNotifier), after each datagram when
// the sub-link cannot tell, and when it ends. Call it before the first
// WritePacket.
func (l *Link) PushBatches(open func() netx.PacketBatch) {
	l.mu.Lock()
	l.batches = open
	l.mu.Unlock()
}

// read receives s's datagrams and hands each on, one at a time: to the
// batch PushBatches opens, or to ReadPacket. Readers blocked on the
// hand-off to ReadPacket queue in order, so every sub-link with a datagram
// waiting gets its turn and a busy one cannot starve the others. A reader
// holds a buffer only while a datagram is in flight: it waits for the next
// one without (netx.WaitPacket) and takes one of the datagram's size class.
// When s fails it is removed (unless something else removed it first: an
// eviction, a failed send, Close) and closed; the association goes on.
func (l *Link) read(s *sub, open func() netx.PacketBatch) {
	defer l.readers.Done()
	var (
		batch   netx.PacketBatch
		batched bool // the sub-link says when to flush
	)
	if open != nil {
		batch = open()
		batched = netx.NotifyIdle(s.link, batch.Flush)
		defer batch.Flush()
	}
	for {
		size, err := netx.WaitPacket(s.link)
		if err != nil {
			size = 0 // the read below reports the error, as the link words it
		}
		bp := netx.GetBuf(size)
		n, from, err := s.link.ReadPacket(*bp)
		if err != nil {
			netx.PutBuf(bp)
			l.readFailed(s, err)
			return
		}
		l.replied(s)
		if batch != nil {
			batch.Add((*bp)[:n], from)
			netx.PutBuf(bp)
			if !batched {
				batch.Flush()
			}
			if s.report != nil {
				s.report.deliveredBytes(n)
			}
			continue
		}
		select {
		case l.recv <- delivery{buf: (*bp)[:n], from: from, ack: s.ack}:
		case <-l.done:
			netx.PutBuf(bp)
			if s.report != nil {
				s.report.retire()
			}
			return
		}
		// ReadPacket always acknowledges a datagram it took.
		<-s.ack
		netx.PutBuf(bp)
		if s.report != nil {
			s.report.deliveredBytes(n)
		}
	}
}

// replied notes a datagram s received: its first reports the path's
// health.
func (l *Link) replied(s *sub) {
	if !s.replied.Load() && s.replied.CompareAndSwap(false, true) {
		l.reportPath(s.node, true)
	}
}

// readFailed ends s, whose read failed with err: it is removed (unless
// something else removed it first) and closed.
func (l *Link) readFailed(s *sub, err error) {
	// The flow's Score outcome is taken before anything retires the
	// sub-link or reports its health.
	if s.report != nil {
		s.report.readEnded(err)
	}
	if l.remove(s) {
		s.link.Close()
		l.debug("udp fan-out: sub-link %s ended: %v", s.id, err)
		if !errors.Is(err, net.ErrClosed) {
			l.reportPath(s.node, false)
		}
	}
}

// ReadPacket returns the next datagram from any sub-link, attributed to the
// peer that sent it. A datagram longer than p is truncated. It blocks until
// one arrives and fails only once the link is closed (net.ErrClosed).
func (l *Link) ReadPacket(p []byte) (int, netx.Addr, error) {
	select {
	case <-l.done:
		return 0, netx.Addr{}, net.ErrClosed
	default:
	}
	select {
	case d := <-l.recv:
		n := copy(p, d.buf)
		d.ack <- struct{}{}
		return n, d.from, nil
	case <-l.done:
		return 0, netx.Addr{}, net.ErrClosed
	}
}
