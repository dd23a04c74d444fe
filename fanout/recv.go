package fanout

import (
	"net"
	"sync"

	"switchyard/netx"
)

// maxDatagram is the largest datagram a sub-link reader can receive.
const maxDatagram = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, maxDatagram); return &b }}

// delivery is one datagram a reader hands to ReadPacket. buf belongs to the
// reader, which reuses it only after ReadPacket signals ack.
type delivery struct {
	buf  []byte
	from netx.Addr
	ack  chan<- struct{}
}

// read receives s's datagrams and hands each to ReadPacket, one at a time.
// Readers blocked on the hand-off queue in order, so every sub-link with a
// datagram waiting gets its turn and a busy one cannot starve the others.
// When s fails it is removed (unless something else removed it first: an
// eviction, a failed send, Close) and closed; the association goes on.
func (l *Link) read(s *sub) {
	defer l.readers.Done()
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, from, err := s.link.ReadPacket(buf)
		if err != nil {
			if l.remove(s) {
				s.link.Close()
				l.debug("udp fan-out: sub-link %s ended: %v", s.id, err)
			}
			return
		}
		select {
		case l.recv <- delivery{buf: buf[:n], from: from, ack: s.ack}:
		case <-l.done:
			return
		}
		// ReadPacket always acknowledges a datagram it took.
		<-s.ack
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
