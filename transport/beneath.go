package transport

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"syscall"

	utls "github.com/refraction-networking/utls"
)

// A flow that steps down from TLS (VLESS Vision: once the inner TLS
// carries application data, both ends move its records on the TCP
// connection itself) must find, at the step, nothing of the server's raw
// bytes inside the TLS layer. recordConn sits between the TLS client and
// the TCP conn and hands the TLS layer at most the rest of the record it is
// reading on each Read: the TLS layer never holds bytes past the record it
// decrypts, and what was read from the socket beyond it stays here, where
// Beneath gives it to the flow.

// recordHeaderLen is a TLS record's header: type, version, length.
const recordHeaderLen = 5

// recordBuf holds the largest TLS record (16 KiB of plaintext, the 256
// bytes of expansion TLS 1.2 allows) and its header.
const recordBuf = recordHeaderLen + 16384 + 2048

type recordConn struct {
	*net.TCPConn

	mu   sync.Mutex // one reader; Beneath takes the rest under it
	buf  []byte
	r, w int
	left int  // bytes of the current record not yet handed out
	down bool // Beneath took the conn: the TLS layer reads no more
	// open: the flow will not step down; reads are no longer bounded to
	// a record, nor copied once what is buffered is handed out.
	open bool
	// src replaces the TCP conn as what is read (the fuzz target); nil:
	// the TCP conn.
	src io.Reader
	// nowait: a read that would wait for the socket fails with
	// errWouldBlock instead (TLSStream.Read's fill); the reading
	// goroutine's alone.
	nowait bool
	nw     tcpNoWait
}

// errWouldBlock is a read of a nowait recordConn with nothing to read. It
// is a temporary net.Error, which the TLS layer does not keep: its next
// read goes on from where this one stopped.
var errWouldBlock error = wouldBlock{}

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "transport: nothing to read yet" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

// socketRead reads the TCP conn, without waiting when nowait is set.
func (c *recordConn) socketRead(p []byte) (int, error) {
	if !c.nowait {
		return c.TCPConn.Read(p)
	}
	c.nw.c = c.TCPConn
	return c.nw.read(p)
}

// tcpNoWait reads a TCP conn without waiting for it. One goroutine at a
// time uses it.
type tcpNoWait struct {
	c  *net.TCPConn
	rc syscall.RawConn
	// The read's arguments and results, so that it makes no closure per
	// call.
	fn  func(fd uintptr) bool
	p   []byte
	n   int
	err error
}

// read reads what the conn already received into p: errWouldBlock when
// nothing is there yet (or on an error, which a waiting read reports
// next), io.EOF at its end.
func (w *tcpNoWait) read(p []byte) (int, error) {
	if w.rc == nil {
		rc, err := w.c.SyscallConn()
		if err != nil {
			return 0, errWouldBlock
		}
		w.rc = rc
		w.fn = func(fd uintptr) bool {
			w.n, w.err = syscall.Read(int(fd), w.p)
			return true // never wait: EAGAIN is the answer
		}
	}
	w.p = p
	err := w.rc.Read(w.fn)
	w.p = nil
	n, rerr := w.n, w.err
	switch {
	case err != nil, rerr != nil:
		return 0, errWouldBlock
	case n == 0 && len(p) > 0:
		return 0, io.EOF
	}
	return n, nil
}

// ErrSteppedDown is the error of a read of the TLS layer once the flow has
// stepped down to the TCP conn beneath it.
var ErrSteppedDown = errors.New("transport: the flow stepped down from TLS to the TCP conn")

func (c *recordConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return 0, ErrSteppedDown
	}
	if c.open {
		if c.r < c.w {
			n := copy(p, c.buf[c.r:c.w])
			c.r += n
			return n, nil
		}
		return c.socketRead(p)
	}
	if c.buf == nil {
		c.buf = make([]byte, recordBuf)
	}
	if c.left == 0 {
		// The next record's header, whole, to learn its length.
		for c.w-c.r < recordHeaderLen {
			if err := c.fill(); err != nil {
				// A cut header stays buffered: a read cut by its
				// deadline (a relay's idle check) goes on from it.
				return 0, err
			}
		}
		h := c.buf[c.r:]
		c.left = recordHeaderLen + (int(h[3])<<8 | int(h[4]))
	}
	if c.r == c.w {
		if err := c.fill(); err != nil {
			return 0, err
		}
	}
	n := copy(p[:min(len(p), c.left)], c.buf[c.r:c.w])
	c.r += n
	c.left -= n
	return n, nil
}

// fill reads from the socket after what is buffered, moving it to the
// front first.
func (c *recordConn) fill() error {
	if c.r > 0 {
		c.w = copy(c.buf, c.buf[c.r:c.w])
		c.r = 0
	}
	var n int
	var err error
	if c.src != nil {
		n, err = c.src.Read(c.buf[c.w:])
	} else {
		n, err = c.socketRead(c.buf[c.w:])
	}
	c.w += n
	if n > 0 {
		return nil
	}
	return err
}

// beneath ends the TLS layer's reads and returns the TCP conn with what was
// read from it past the TLS layer's last record.
func (c *recordConn) beneath() (*net.TCPConn, []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.down = true
	rest := append([]byte(nil), c.buf[c.r:c.w]...)
	c.r, c.w = 0, 0
	c.buf = nil
	return c.TCPConn, rest
}

// TLSStream is a TLS stream over the tcp transport. Dialed by a Dialer
// built with Options.Beneath, its TCP conn stays reachable for a flow that
// steps down from TLS; otherwise it never steps down and only reads ahead.
type TLSStream struct {
	net.Conn // the TLS conn
	raw      *recordConn
	version  uint16
}

// fillMin is the room a read of a TLSStream must have left to take another
// record that is already there.
const fillMin = 4 << 10

// Read returns the plaintext of the next record, and of the records after
// it already received, as far as p has room (each Read of the TLS layer
// returns one record's): a relay then writes a read's worth at once. Only
// a stream that will not step down reads ahead: before, each read takes
// one record (Beneath).
func (s *TLSStream) Read(p []byte) (int, error) {
	n, err := s.Conn.Read(p)
	if err != nil || !s.raw.open || s.raw.src != nil {
		return n, err
	}
	for len(p)-n >= fillMin {
		s.raw.nowait = true
		m, err := s.Conn.Read(p[n:])
		s.raw.nowait = false
		n += m
		if err != nil || m == 0 {
			// Nothing more yet; an error the TLS layer kept comes with the
			// next read.
			break
		}
	}
	return n, nil
}

// ReadReceived reads as Read does what was already received, without
// waiting: 0 and no error when nothing is there yet. Before the flow
// stays on TLS it reads one record at the most, as Read.
func (s *TLSStream) ReadReceived(p []byte) int {
	s.raw.nowait = true
	n, _ := s.Conn.Read(p)
	s.raw.nowait = false
	return n
}

// TLSVersion is the version the handshake settled on.
func (s *TLSStream) TLSVersion() uint16 { return s.version }

// Beneath ends the TLS layer's reads and returns the TCP conn under it and
// the bytes already read from it that the TLS layer did not take: the
// first of what the server sent on the TCP conn itself. Call it from the
// reading goroutine, after the TLS record that announced the step has been
// read whole. Writes may go to the TCP conn from then on too.
func (s *TLSStream) Beneath() (*net.TCPConn, []byte) { return s.raw.beneath() }

// StayOnTLS tells the stream that the flow will not step down: the TLS
// layer's reads then go to the TCP conn as they would without Beneath.
// Call it from the reading goroutine.
func (s *TLSStream) StayOnTLS() {
	s.raw.mu.Lock()
	s.raw.open = true
	s.raw.mu.Unlock()
}

// NetConn is the TCP conn under the stream, as *tls.Conn's NetConn is: the
// connection pool probes an idle stream's socket through it.
func (s *TLSStream) NetConn() net.Conn { return s.raw.TCPConn }

// CloseWrite ends the stream's sending as the TLS conn's CloseWrite does.
func (s *TLSStream) CloseWrite() error {
	if cw, ok := s.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// TCP is the TCP conn under the TLS layer, for writes once the flow has
// stepped down.
func (s *TLSStream) TCP() *net.TCPConn { return s.raw.TCPConn }

// tlsVersion is the version of a TLS conn of either stack.
func tlsVersion(c net.Conn) uint16 {
	switch t := c.(type) {
	case *tls.Conn:
		return t.ConnectionState().Version
	case *utls.UConn:
		return t.ConnectionState().Version
	}
	return 0
}

// fullRecords turns off the small records a TLS client sends first after a
// quiet spell: each Write of up to 16 KiB is then one record. A Vision
// block written on its own so stays inside one record, as a reader that
// takes a block header only whole (sing-box's) needs.
func (l *tlsLayer) fullRecords() {
	switch {
	case l.reality != nil:
		l.reality.fullRecords = true
	case l.fp != nil:
		l.fp.cfg.DynamicRecordSizingDisabled = true
	default:
		l.std.DynamicRecordSizingDisabled = true
	}
}
