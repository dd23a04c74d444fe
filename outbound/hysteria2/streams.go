package hysteria2

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"

	"switchyard/internal/slot"
)

// streamCap bounds the TCP streams open at once on the outbound's QUIC
// connection (max_concurrent_streams): a flow beyond it waits, within its
// dial's context, for an open one to close. A Hysteria 2 server refuses a
// stream past its own limit at once, and core/v2's client opens streams
// without waiting, so the wait happens here. nil: no cap.
type streamCap chan struct{}

func newStreamCap(n int) streamCap {
	if n <= 0 {
		return nil
	}
	return make(streamCap, n)
}

// take holds a place for one stream, waiting for one while all are taken.
func (c streamCap) take(ctx context.Context) error {
	if c == nil {
		return nil
	}
	select {
	case c <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("hysteria2: all %d streams of the connection are open (max_concurrent_streams): %w", cap(c), ctx.Err())
	}
}

// give frees a place taken with take.
func (c streamCap) give() {
	if c != nil {
		<-c
	}
}

// stream is a TCP flow on the connection. It holds a place in the
// outbound's streamCap and a hold on its connection (slot.Acquire); closing
// it gives both back, once.
type stream struct {
	net.Conn
	out    *Outbound
	res    *slot.Res[*conn]
	closed atomic.Bool
}

// Read reads the flow; the connection's loss fails it as the shared
// carrier's (conn.carrier).
func (s *stream) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if err != nil && err != io.EOF {
		err = s.res.V.carrier(err)
	}
	return n, err
}

// Write writes the flow; the connection's loss fails it as Read's does.
func (s *stream) Write(p []byte) (int, error) {
	n, err := s.Conn.Write(p)
	if err != nil {
		err = s.res.V.carrier(err)
	}
	return n, err
}

func (s *stream) Close() error {
	err := s.Conn.Close()
	if s.closed.CompareAndSwap(false, true) {
		s.out.streams.give()
		s.res.Release()
	}
	return err
}
