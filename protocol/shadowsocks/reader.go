package shadowsocks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"switchyard/netx"
)

// Errors of the client runtime, with the texts of the spec.
var (
	// ErrUpstreamFrameTooLarge fails a flow whose server sent a frame that
	// does not fit the flow's read buffer.
	ErrUpstreamFrameTooLarge error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("upstream frame larger than the client runtime's buffer")}
	// ErrFrameTooLarge fails the send of a datagram whose sealed frame does
	// not fit the link's buffer.
	ErrFrameTooLarge error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("frame larger than the client runtime's buffer")}
	// ErrClosedInHandshake: the server closed the stream inside its salt or
	// response header. It matches io.ErrUnexpectedEOF.
	ErrClosedInHandshake error = unexpectedEOF("upstream closed during the handshake")
	// ErrClosedInFrame: the server closed the stream inside a chunk. It
	// matches io.ErrUnexpectedEOF.
	ErrClosedInFrame error = unexpectedEOF("upstream closed inside a frame")
)

type unexpectedEOF string

func (e unexpectedEOF) Error() string        { return string(e) }
func (e unexpectedEOF) Is(target error) bool { return target == io.ErrUnexpectedEOF }

// MaxClockSkew is how far a 2022 timestamp may be from the local clock.
const MaxClockSkew = 30 * time.Second

// checkTimestamp refuses a 2022 timestamp more than MaxClockSkew away.
func checkTimestamp(what string, ts uint64, now time.Time) error {
	skew := now.Unix() - int64(ts)
	if skew < 0 {
		skew = -skew
	}
	if skew > int64(MaxClockSkew/time.Second) || int64(ts) < 0 {
		return fmt.Errorf("shadowsocks 2022: %s timestamp %d is %d s from the local clock (at most %d s allowed)",
			what, ts, skew, int64(MaxClockSkew/time.Second))
	}
	return nil
}

// Reader states.
const (
	readSalt    = iota // the server's salt
	readHeader         // the 2022 response fixed header
	readLength         // a sealed chunk length
	readPayload        // a sealed payload of want bytes
)

// Reader opens the server's half of one TCP session from r: the salt, the
// 2022 response header (bound to the request's salt), then the chunks. It
// reads into one buffer and decrypts in place. The buffer starts as given
// and grows once to the flow's client runtime buffer (the method's
// BufSize), when a frame needs more room or a read fills it: a flow that
// moves little holds little. A frame larger than BufSize fails the flow.
type Reader struct {
	resp  Response
	r     io.Reader
	buf   []byte
	head  int    // buf[head:tail] is read and not yet opened
	tail  int    //
	plain []byte // opened payload not yet returned, in buf
	open  opener
	state int
	want  int   // the payload length of readPayload
	err   error // sticky: the flow failed
	full  bool  // the last read filled the buffer: grow it before the next
}

// NewReader returns the reader of the response to the request resp came
// with, reading r through buf, which may be shorter than the method's
// BufSize (it then grows as Reader says).
func (resp Response) NewReader(r io.Reader, buf []byte) *Reader {
	return &Reader{resp: resp, r: r, buf: buf}
}

// Read returns opened payload. It returns io.EOF when the server closed the
// stream between chunks (or before sending anything).
func (r *Reader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for len(r.plain) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		if err := r.step(); err != nil {
			var ne interface{ Timeout() bool }
			if !errors.As(err, &ne) || !ne.Timeout() {
				r.err = err
			}
			return 0, err
		}
	}
	n := copy(p, r.plain)
	r.plain = r.plain[n:]
	// Chunks already read from the upstream join this Read while p has
	// room, so small chunks cost one write downstream per read of the
	// upstream. A failure among them is kept for the next Read.
	for n < len(p) && len(r.plain) == 0 && r.err == nil && r.buffered() {
		if err := r.step(); err != nil {
			r.err = err
			break
		}
		m := copy(p[n:], r.plain)
		n += m
		r.plain = r.plain[m:]
	}
	return n, nil
}

// buffered reports whether the next body frame (a chunk's length or its
// payload) is whole in the buffer, so that step reads nothing.
func (r *Reader) buffered() bool {
	var n int
	switch r.state {
	case readLength:
		n = 2 + TagLen
	case readPayload:
		n = r.want + TagLen
	default:
		return false
	}
	return r.tail-r.head >= n
}

// step decodes the next frame.
func (r *Reader) step() error {
	c := r.resp.c
	switch r.state {
	case readSalt:
		salt, err := r.fill(c.m.KeyLen, ErrClosedInHandshake, true)
		if err != nil {
			return err
		}
		return r.start(salt)
	case readHeader:
		b, err := r.fill(1+8+c.m.KeyLen+2+TagLen, ErrClosedInHandshake, false)
		if err != nil {
			return err
		}
		h, err := r.open.open(b)
		if err != nil {
			return fmt.Errorf("shadowsocks 2022: response header: %w", err)
		}
		if h[0] != headerServer {
			return fmt.Errorf("shadowsocks 2022: response header type %d (want %d)", h[0], headerServer)
		}
		if err := checkTimestamp("response header", binary.BigEndian.Uint64(h[1:9]), c.now()); err != nil {
			return err
		}
		if !bytes.Equal(h[9:9+c.m.KeyLen], r.resp.reqSalt[:c.m.KeyLen]) {
			return netx.WithFault(errors.New("shadowsocks 2022: the response answers another request (its request salt differs from ours)"), netx.FaultFraming)
		}
		r.want = int(binary.BigEndian.Uint16(h[9+c.m.KeyLen:]))
		r.state = readPayload
	case readLength:
		b, err := r.fill(2+TagLen, ErrClosedInFrame, true)
		if err != nil {
			return err
		}
		l, err := r.open.open(b)
		if err != nil {
			return fmt.Errorf("shadowsocks: chunk length: %w", err)
		}
		r.want = int(binary.BigEndian.Uint16(l))
		r.state = readPayload
	case readPayload:
		b, err := r.fill(r.want+TagLen, ErrClosedInFrame, false)
		if err != nil {
			return err
		}
		if r.plain, err = r.open.open(b); err != nil {
			return fmt.Errorf("shadowsocks: chunk payload: %w", err)
		}
		r.state = readLength
	}
	return nil
}

// start sets up the opener from the server's salt.
func (r *Reader) start(salt []byte) error {
	c := r.resp.c
	var key []byte
	if c.m.Is2022 {
		key = sessionSubkey(c.key, salt)
		r.state = readHeader
	} else {
		var err error
		if key, err = aeadSubkey(c.key, salt); err != nil {
			return err
		}
		r.state = readLength
	}
	aead, err := c.m.newAEAD(key)
	if err != nil {
		return err
	}
	r.open = opener{aead: aead}
	return nil
}

// fill returns the next n bytes of the stream, reading until they are
// buffered, and consumes them. An end of stream before them is io.EOF when
// nothing of them was read and clean is set, and short otherwise.
func (r *Reader) fill(n int, short error, clean bool) ([]byte, error) {
	if n > len(r.buf) || r.full {
		if n > r.resp.c.m.BufSize() {
			return nil, ErrUpstreamFrameTooLarge
		}
		r.grow()
	}
	if r.head == r.tail {
		r.head, r.tail = 0, 0
	} else if r.head+n > len(r.buf) {
		r.tail = copy(r.buf, r.buf[r.head:r.tail])
		r.head = 0
	}
	for r.tail-r.head < n {
		m, err := r.r.Read(r.buf[r.tail:])
		r.tail += m
		r.full = r.tail == len(r.buf) && len(r.buf) < r.resp.c.m.BufSize()
		if r.tail-r.head >= n {
			break
		}
		if err != nil {
			if err == io.EOF {
				if clean && r.tail == r.head {
					return nil, io.EOF
				}
				return nil, short
			}
			return nil, err
		}
	}
	b := r.buf[r.head : r.head+n]
	r.head += n
	return b, nil
}

// grow moves the unopened bytes into a buffer of the method's BufSize.
func (r *Reader) grow() {
	r.full = false
	size := r.resp.c.m.BufSize()
	if len(r.buf) >= size {
		return
	}
	b := make([]byte, size)
	r.tail = copy(b, r.buf[r.head:r.tail])
	r.head = 0
	r.buf = b
}
