package transport

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"

	"switchyard/netx"
)

// rxChunkSize is one buffer of received bytes: the largest DATA frame this
// client accepts.
const rxChunkSize = 16384

// rxChunk holds received bytes b[off:n]; pooled, so a stream holds memory
// only for what it has not read yet.
type rxChunk struct {
	b      [rxChunkSize]byte
	off, n int
}

var rxPool = sync.Pool{New: func() any { return new(rxChunk) }}

var errStreamWriteClosed = errors.New("grpc: write after the request body ended")

// h2Stream is one gRPC call: the request body toward the server, the
// response body back. One goroutine reads and one writes at a time.
type h2Stream struct {
	c     *h2Conn
	id    uint32
	rwake chan struct{} // a reader may go on (data, end, deadline change)
	wwake chan struct{} // a writer may go on (window, deadline change)
	done  chan struct{} // closed once the stream failed or closed

	sendWindow int64 // guarded by c.mu, like the connection window

	mu          sync.Mutex // guards what follows
	rx          []*rxChunk
	rxEnded     bool  // the server ended its body
	recvLeft    int64 // window granted to the server and not used
	unacked     int64 // consumed bytes not yet credited to the stream
	gotResponse bool
	err         error // the stream failed
	reset       bool  // RST_STREAM sent or received
	localEnded  bool  // END_STREAM sent
	closed      bool
	doneClosed  bool
	rdl, wdl    time.Time

	rtimer *time.Timer // the reading goroutine's
	wtimer *time.Timer // the writing goroutine's
}

func newH2Stream(c *h2Conn, id uint32, sendWindow int64) *h2Stream {
	return &h2Stream{
		c: c, id: id, sendWindow: sendWindow, recvLeft: streamWindow,
		rwake: make(chan struct{}, 1), wwake: make(chan struct{}, 1), done: make(chan struct{}),
	}
}

// closeDone closes done once; mu is held.
func (s *h2Stream) closeDone() {
	if !s.doneClosed {
		s.doneClosed = true
		close(s.done)
	}
}

// push appends a DATA frame's payload (length counts padding too). drop
// reports that nobody will read it, so the caller credits it back.
func (s *h2Stream) push(data []byte, length int64, end bool) (drop bool) {
	s.mu.Lock()
	if s.closed || s.err != nil {
		s.mu.Unlock()
		return true
	}
	if s.rxEnded || length > s.recvLeft {
		s.mu.Unlock()
		s.fail(netx.WithFault(errors.New("grpc: the server sent past its stream's end or window"), netx.FaultFraming), true)
		return true
	}
	s.recvLeft -= length
	s.unacked += length - int64(len(data))
	for len(data) > 0 {
		var tail *rxChunk
		if k := len(s.rx); k > 0 && s.rx[k-1].n < rxChunkSize {
			tail = s.rx[k-1]
		} else {
			tail = rxPool.Get().(*rxChunk)
			s.rx = append(s.rx, tail)
		}
		n := copy(tail.b[tail.n:], data)
		tail.n += n
		data = data[n:]
	}
	if end {
		s.rxEnded = true
	}
	s.mu.Unlock()
	signal(s.rwake)
	return false
}

// peek waits for received bytes and returns the unread part of the first
// buffer; the caller reads it, then calls consume.
func (s *h2Stream) peek() ([]byte, error) {
	for {
		s.mu.Lock()
		switch {
		case s.closed:
			s.mu.Unlock()
			return nil, net.ErrClosed
		case len(s.rx) > 0:
			h := s.rx[0]
			b := h.b[h.off:h.n]
			s.mu.Unlock()
			return b, nil
		case s.err != nil:
			err := s.err
			s.mu.Unlock()
			return nil, err
		case s.rxEnded:
			s.mu.Unlock()
			return nil, io.EOF
		}
		dl := s.rdl
		s.mu.Unlock()
		if err := s.wait(s.rwake, dl, &s.rtimer); err != nil {
			return nil, err
		}
	}
}

// consume marks n peeked bytes read and credits them back to the server.
func (s *h2Stream) consume(n int) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	h := s.rx[0]
	h.off += n
	if h.off == h.n {
		copy(s.rx, s.rx[1:])
		s.rx[len(s.rx)-1] = nil
		s.rx = s.rx[:len(s.rx)-1]
		h.off, h.n = 0, 0
		rxPool.Put(h)
	}
	s.unacked += int64(n)
	var upd int64
	if s.unacked >= streamUpdateAt && !s.rxEnded && !s.reset && s.err == nil {
		upd, s.unacked = s.unacked, 0
		s.recvLeft += upd
	}
	s.mu.Unlock()
	if upd > 0 {
		s.c.writeWindowUpdate(s.id, upd)
	}
	s.c.credit(int64(n))
}

// send writes p as DATA frames within the server's windows.
func (s *h2Stream) send(p []byte) error {
	c := s.c
	for len(p) > 0 {
		s.mu.Lock()
		err := s.writeErr()
		dl := s.wdl
		s.mu.Unlock()
		if err != nil {
			return err
		}
		c.mu.Lock()
		if c.err != nil {
			err := c.err
			c.mu.Unlock()
			return err
		}
		n := min(int64(len(p)), s.sendWindow, c.sendWindow, int64(c.maxFrame))
		if n > 0 {
			s.sendWindow -= n
			c.sendWindow -= n
		}
		c.mu.Unlock()
		if n <= 0 {
			if err := s.wait(s.wwake, dl, &s.wtimer); err != nil {
				return err
			}
			continue
		}
		if err := c.writeData(s.id, false, p[:n]); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// writeErr is why nothing more may be sent; mu is held.
func (s *h2Stream) writeErr() error {
	switch {
	case s.closed:
		return net.ErrClosed
	case s.err != nil:
		return s.err
	case s.localEnded:
		return errStreamWriteClosed
	}
	return nil
}

// closeWrite ends the request body.
func (s *h2Stream) closeWrite() error {
	s.mu.Lock()
	if s.localEnded {
		s.mu.Unlock()
		return nil
	}
	err := s.writeErr()
	s.localEnded = true
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.c.writeData(s.id, true, nil)
}

// wait blocks until woken through wake, the stream is done, or the deadline.
func (s *h2Stream) wait(wake chan struct{}, dl time.Time, t **time.Timer) error {
	if dl.IsZero() {
		select {
		case <-wake:
		case <-s.done:
		}
		return nil
	}
	d := time.Until(dl)
	if d <= 0 {
		return os.ErrDeadlineExceeded
	}
	if *t == nil {
		*t = time.NewTimer(d)
	} else {
		(*t).Reset(d)
	}
	select {
	case <-wake:
	case <-s.done:
	case <-(*t).C:
		return os.ErrDeadlineExceeded
	}
	(*t).Stop()
	return nil
}

// fail ends the stream with err; rst tells the server when the stream is
// still open on its side.
func (s *h2Stream) fail(err error, rst bool) {
	s.mu.Lock()
	if s.err != nil || s.closed {
		s.mu.Unlock()
		return
	}
	s.err = err
	rst = rst && !s.reset && !(s.localEnded && s.rxEnded)
	s.reset = s.reset || rst
	s.closeDone()
	s.mu.Unlock()
	if rst {
		s.c.writeReset(s.id, http2.ErrCodeCancel)
	}
}

func (s *h2Stream) onReset(code http2.ErrCode) {
	s.mu.Lock()
	s.reset = true
	s.mu.Unlock()
	s.fail(netx.WithFault(fmt.Errorf("grpc: the server reset the stream (%v)", code), netx.FaultStreamReset), false)
}

// onHeaders checks the response headers (HTTP 200, a gRPC content type)
// and the trailers (grpc-status 0); anything else fails the stream.
func (s *h2Stream) onHeaders(f *http2.MetaHeadersFrame) {
	status := f.PseudoValue("status")
	end := f.StreamEnded()
	s.mu.Lock()
	first := !s.gotResponse
	if first && strings.HasPrefix(status, "1") && !end {
		s.mu.Unlock()
		return // informational
	}
	s.gotResponse = true
	s.mu.Unlock()
	var err error
	if first {
		switch ct := header(f, "content-type"); {
		case status != "200":
			err = fmt.Errorf("grpc: the server answered HTTP %q", status)
		case !strings.HasPrefix(ct, "application/grpc"):
			err = fmt.Errorf("grpc: the server answered content-type %q", ct)
		}
	}
	if code := header(f, "grpc-status"); err == nil && code != "" && code != "0" {
		msg := header(f, "grpc-message")
		if m, uerr := url.PathUnescape(msg); uerr == nil {
			msg = m
		}
		err = fmt.Errorf("grpc: the server ended the call with status %s: %s", code, msg)
	}
	if err != nil {
		s.fail(err, !end)
		return
	}
	if end {
		s.mu.Lock()
		s.rxEnded = true
		s.mu.Unlock()
		signal(s.rwake)
	}
}

func header(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// close ends the stream here: a reset tells the server unless both bodies
// ended, unread bytes go back to the connection window, and the
// connection forgets the stream.
func (s *h2Stream) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	rst := !s.reset && !(s.localEnded && s.rxEnded)
	s.reset = true
	var unread int64
	for _, h := range s.rx {
		unread += int64(h.n - h.off)
	}
	// A Read may still be copying out of these buffers: they are left to
	// the collector rather than pooled.
	s.rx = nil
	s.closeDone()
	s.mu.Unlock()
	if rst {
		s.c.writeReset(s.id, http2.ErrCodeCancel)
	}
	s.c.forget(s)
	if unread > 0 {
		s.c.credit(unread)
	}
}

func (s *h2Stream) setReadDeadline(t time.Time) {
	s.mu.Lock()
	s.rdl = t
	s.mu.Unlock()
	signal(s.rwake)
}

func (s *h2Stream) setWriteDeadline(t time.Time) {
	s.mu.Lock()
	s.wdl = t
	s.mu.Unlock()
	signal(s.wwake)
}
