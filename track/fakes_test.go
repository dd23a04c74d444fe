package track_test

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"switchyard/netx"
)

// countConn is an in-memory conn: reads return data from a fixed supply,
// writes are swallowed, Close is counted.
type countConn struct {
	net.Conn // nil: only the methods below are called
	closes   atomic.Int32
	closed   atomic.Bool
}

func (c *countConn) Read(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	for i := range p {
		p[i] = 'r'
	}
	return len(p), nil
}

func (c *countConn) Write(p []byte) (int, error) {
	if c.closed.Load() {
		return 0, net.ErrClosed
	}
	return len(p), nil
}

func (c *countConn) Close() error {
	c.closes.Add(1)
	c.closed.Store(true)
	return nil
}

// sinkLink behaves like a blackhole: it swallows every write, even after it
// is closed, and its ReadPacket returns only the datagrams queued with
// deliver, or an error once it is closed.
type sinkLink struct {
	in        chan []byte
	closeOnce sync.Once
	done      chan struct{}
	closes    atomic.Int32
	failWrite error
}

func newSinkLink() *sinkLink {
	return &sinkLink{in: make(chan []byte, 16), done: make(chan struct{})}
}

func (s *sinkLink) deliver(p []byte) { s.in <- p }

func (s *sinkLink) WritePacket(p []byte, to netx.Addr) error { return s.failWrite }

func (s *sinkLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	select {
	case b := <-s.in:
		return copy(p, b), netx.DomainAddr("peer.example", 53), nil
	case <-s.done:
		return 0, netx.Addr{}, errSinkClosed
	}
}

var errSinkClosed = errors.New("sink closed")

func (s *sinkLink) Close() error {
	s.closes.Add(1)
	s.closeOnce.Do(func() { close(s.done) })
	return nil
}

// batchSink is a sinkLink that takes runs (netx.PacketBatchWriter): it
// records each run's length and sends only the first sendable of each.
type batchSink struct {
	*sinkLink
	sendable int
	runs     []int
}

func (b *batchSink) WritePackets(ps [][]byte, to netx.Addr) (int, error) {
	b.runs = append(b.runs, len(ps))
	if len(ps) > b.sendable {
		return b.sendable, errors.New("no buffer space")
	}
	return len(ps), nil
}
