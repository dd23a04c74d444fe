package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// Stream returns a connection that speaks DNS over TCP (RFC 1035 section
// 4.2.2, RFC 7766): each message in either direction is preceded by its
// length in two bytes. Many queries may be sent on it, pipelined; their
// answers come back in the order the queries were sent. At most
// MaxInFlight queries are held at once; beyond that the service reads no
// further until the oldest answer is written.
//
// The service's side ends the connection (the client then reads EOF) when
// no query begins for StreamIdleTimeout, when a query is longer than
// MaxQuerySize, when a query's bytes do not all arrive within the query
// timeout, or when an answer cannot be written within it (the client does
// not read). Answers due are written first, except after a write failed.
// A message whose header does not parse, or a response, gets no answer;
// the connection goes on.
//
// The connection's deadlines work as a net.Conn's do. CloseWrite says no
// more queries come: the answers due are written and then the client reads
// EOF. Close ends the connection at once, cancels the queries in progress
// and returns once the goroutines serving it have ended.
func (s *Service) Stream() net.Conn {
	client, server := net.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	st := &stream{
		s:      s,
		conn:   server,
		ctx:    ctx,
		cancel: cancel,
		order:  make(chan chan reply, s.maxInFlight),
		done:   make(chan struct{}),
	}
	go st.serve()
	return &streamConn{Conn: client, st: st}
}

// streamConn is the client's end of a stream.
type streamConn struct {
	net.Conn // the client end of the pipe
	st       *stream
}

// Write fails once CloseWrite was called.
func (c *streamConn) Write(p []byte) (int, error) {
	if c.st.noMore.Load() {
		return 0, net.ErrClosed
	}
	return c.Conn.Write(p)
}

// CloseWrite tells the service that no more queries come.
func (c *streamConn) CloseWrite() error {
	// Set the flag before the deadline: the reader sets its own deadline
	// and then looks at the flag, so one of the two wakes it.
	c.st.noMore.Store(true)
	return c.st.conn.SetReadDeadline(time.Now())
}

// Close ends the stream and waits for the goroutines serving it.
func (c *streamConn) Close() error {
	c.st.cancel()
	err := c.Conn.Close()
	<-c.st.done
	return err
}

// stream serves one connection: a reader that starts a goroutine per
// query, and a writer that writes their answers in order.
type stream struct {
	s      *Service
	conn   net.Conn // the service's end of the pipe
	ctx    context.Context
	cancel context.CancelFunc
	// order holds, in query order, the channel each query's answer comes
	// on; an answer of no bytes means no reply.
	order  chan chan reply
	noMore atomic.Bool   // set by CloseWrite
	done   chan struct{} // closed once serve has returned
}

// serve runs the stream to its end and owns every goroutine of it.
func (st *stream) serve() {
	defer close(st.done)
	var wg sync.WaitGroup // the writer and the query goroutines
	wg.Add(1)
	go func() {
		defer wg.Done()
		st.write()
	}()
	if hungUp := st.read(&wg); hungUp {
		st.cancel() // nobody will read the answers
	}
	close(st.order)
	wg.Wait()
	st.cancel()
	st.conn.Close()
}

// read reads queries until the stream is to end; hungUp reports that the
// client closed its end.
func (st *stream) read(wg *sync.WaitGroup) (hungUp bool) {
	var hdr [2]byte
	for {
		st.conn.SetReadDeadline(time.Now().Add(st.s.idle))
		if st.noMore.Load() {
			return false
		}
		if _, err := io.ReadFull(st.conn, hdr[:]); err != nil {
			return st.ended(err)
		}
		n := int(binary.BigEndian.Uint16(hdr[:]))
		if n > MaxQuerySize {
			st.s.stats.dropped.Add(1)
			st.s.debug("dns service: ending a TCP stream: query too long", "size", n, "max", MaxQuerySize)
			return false
		}
		st.conn.SetReadDeadline(time.Now().Add(st.s.timeout))
		bp := netx.GetBuf(n)
		b := (*bp)[:n]
		if _, err := io.ReadFull(st.conn, b); err != nil {
			netx.PutBuf(bp)
			return st.ended(err)
		}
		st.s.stats.queries.Add(1)
		slot := make(chan reply, 1)
		select {
		case st.order <- slot:
		case <-st.ctx.Done(): // the writer failed
			netx.PutBuf(bp)
			return false
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, why := st.s.answer(st.ctx, b, netx.TCP)
			netx.PutBuf(bp)
			if why != "" {
				st.s.debug("dns service: no reply on a TCP stream", "why", why)
			}
			slot <- r
		}()
	}
}

// ended says whether a read error means the client hung up (rather than a
// deadline passing, or CloseWrite).
func (st *stream) ended(err error) bool {
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// write writes the answers in order. After a failed write it cancels the
// queries, closes the connection (which ends the reader) and drains.
func (st *stream) write() {
	failed := false
	for slot := range st.order {
		r := <-slot
		if len(r.b) == 0 {
			continue
		}
		if failed {
			r.release()
			st.s.stats.dropped.Add(1)
			continue
		}
		fp := netx.GetBuf(len(r.b) + 2)
		frame := (*fp)[:len(r.b)+2]
		binary.BigEndian.PutUint16(frame, uint16(len(r.b)))
		copy(frame[2:], r.b)
		r.release()
		st.conn.SetWriteDeadline(time.Now().Add(st.s.timeout))
		_, err := st.conn.Write(frame)
		netx.PutBuf(fp)
		if err != nil {
			failed = true
			st.s.stats.dropped.Add(1)
			st.s.debug("dns service: ending a TCP stream: writing an answer failed", "err", err)
			st.cancel()
			st.conn.Close()
		}
	}
}
