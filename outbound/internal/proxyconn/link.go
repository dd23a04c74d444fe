package proxyconn

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"

	"switchyard/netx"
)

// Framing is one protocol's datagrams on a stream: how a packet is sealed
// in a frame, and how a frame from the upstream is sized and opened.
type Framing interface {
	// AppendFrame appends the frame carrying p toward to. It runs on the
	// writer's goroutine.
	AppendFrame(dst, p []byte, to netx.Addr) ([]byte, error)
	// FrameLen returns how many bytes the frame at the start of b takes.
	// When b is too short to tell, the result is larger than len(b).
	FrameLen(b []byte) (int, error)
	// OpenFrame decodes one whole frame, as FrameLen sized it: the payload
	// (aliasing frame) and the peer it came from. ok is false for a frame
	// that carries no packet, which is skipped. An error ends the link. It
	// runs on the reader's goroutine.
	OpenFrame(frame []byte) (payload []byte, from netx.Addr, ok bool, err error)
}

// inlineSize is the read buffer a Link holds for good, inside itself: what
// the reader reads into while nothing is buffered. It takes in one read a
// frame of any datagram that fits an Ethernet MTU (a DNS answer, a QUIC
// packet) with the longest address in front of it. A frame that needs more
// moves, with what was read of it, to a pooled buffer of the link's size,
// which goes back to the pool once every byte read into it is consumed.
const inlineSize = 2048

// maxEmptyReads is how many reads in a row may return nothing, and no
// error, before reading fails with io.ErrNoProgress (as bufio's).
const maxEmptyReads = 100

// Link is a datagram link over one established stream: every packet, both
// ways, is a frame of its Framing. WritePacket, ReadPacket and Close may
// each run on their own goroutine; WaitPacket is called by the reader only,
// before its ReadPacket.
//
// A link holds no buffer of its size while idle: WritePacket seals each
// packet in a pooled buffer taken for the call, and the reader reads into
// the link's small inline buffer until a frame needs more (see inlineSize).
// An idle link, whatever it carried, holds the inline buffer alone.
type Link struct {
	conn    net.Conn
	framing Framing
	bufSize int // bounds one frame each way
	reserve int // what sealing may add to a payload

	// Reader side. buf is the inline buffer (at most bufSize of it), or
	// pooled's bufSize bytes while a frame needs them; buf[r:w] is read
	// and not yet consumed, and r == w only at 0.
	buf       []byte
	r, w      int
	pooled    *[]byte
	inlineLen int   // the inline buffer's part in use: all of it, or bufSize
	rerr      error // a read error that came with bytes, returned next
	bad       error // the error that ended reading; final

	// The packet WaitPacket opened, still buffered, for ReadPacket.
	pending  bool
	payload  []byte // aliases buf
	from     netx.Addr
	frameLen int

	closeOnce sync.Once
	closeErr  error

	inline [inlineSize]byte
}

var (
	_ netx.PacketLink   = (*Link)(nil)
	_ netx.PacketWaiter = (*Link)(nil)
)

// NewLink returns the link over c. bufSize bounds one frame each way: a
// packet whose payload and reserve (the codec's staging reserve) exceed it
// is refused with ErrFrameTooLarge, and a frame from the upstream longer
// than it fails reading with ErrUpstreamFrameTooLarge.
func NewLink(c net.Conn, f Framing, bufSize, reserve int) *Link {
	l := &Link{
		conn:      c,
		framing:   f,
		bufSize:   bufSize,
		reserve:   reserve,
		inlineLen: min(inlineSize, bufSize),
	}
	l.buf = l.inlineBuf()
	return l
}

// inlineBuf is the part of the inline buffer in use.
func (l *Link) inlineBuf() []byte { return l.inline[:l.inlineLen] }

// WritePacket sends p toward to in one frame and one write, sealed in a
// pooled buffer taken for the call.
func (l *Link) WritePacket(p []byte, to netx.Addr) error {
	if len(p)+l.reserve > l.bufSize {
		return ErrFrameTooLarge
	}
	bp := netx.GetBuf(len(p) + l.reserve)
	defer netx.PutBuf(bp)
	b, err := l.framing.AppendFrame((*bp)[:0], p, to)
	if err != nil {
		return err
	}
	_, err = l.conn.Write(b)
	return err
}

// WaitPacket blocks until the next packet's frame is buffered whole, opens
// it and returns the exact size of its payload (netx.PacketWaiter); the
// frame stays buffered, and the next ReadPacket copies the payload out.
// Frames that carry no packet are skipped. It fails as ReadPacket would,
// with the same errors and the same resumption after a deadline. Only the
// reader calls it, before its ReadPacket.
func (l *Link) WaitPacket() (int, error) {
	if err := l.open(); err != nil {
		return 0, err
	}
	return len(l.payload), nil
}

// ReadPacket returns the next packet from the upstream, truncated to p, and
// the peer it came from. A read cut by a deadline loses nothing: the next
// call resumes the same frame. Any other error, a clean end of the stream
// (io.EOF) included, is returned again by every later call.
func (l *Link) ReadPacket(p []byte) (int, netx.Addr, error) {
	if err := l.open(); err != nil {
		return 0, netx.Addr{}, err
	}
	n := copy(p, l.payload)
	from := l.from
	l.pending, l.payload, l.from = false, nil, netx.Addr{}
	l.consume(l.frameLen)
	return n, from, nil
}

// open makes the next packet pending, unless one is: it reads frames until
// one carries a packet, and skips the others.
func (l *Link) open() error {
	for !l.pending {
		if l.bad != nil {
			return l.bad
		}
		frame, err := l.nextFrame()
		if err != nil {
			return l.fail(err)
		}
		payload, from, ok, err := l.framing.OpenFrame(frame)
		if err != nil {
			return l.fail(err)
		}
		if !ok {
			l.consume(len(frame))
			continue
		}
		l.pending, l.payload, l.from, l.frameLen = true, payload, from, len(frame)
	}
	return nil
}

// nextFrame returns the next whole frame, as the framing sizes it, reading
// until it is buffered; it stays buffered until consumed. A frame longer
// than bufSize is ErrUpstreamFrameTooLarge; an end of stream before the
// first byte of a frame is io.EOF, inside one ErrFrameClosed.
func (l *Link) nextFrame() ([]byte, error) {
	for {
		if b := l.buf[l.r:l.w]; len(b) > 0 {
			n, err := l.framing.FrameLen(b)
			switch {
			case err != nil:
				return nil, err
			case n <= len(b):
				return b[:n], nil
			case n > l.bufSize:
				return nil, ErrUpstreamFrameTooLarge
			}
			l.makeRoom(n)
		}
		if err := l.fill(); err != nil {
			switch {
			case err == io.EOF && l.r == l.w:
				return nil, io.EOF
			case err == io.EOF:
				return nil, ErrFrameClosed
			}
			return nil, err
		}
	}
}

// makeRoom makes buf hold a frame of n bytes from r, n at most bufSize:
// the unread bytes move to a pooled buffer when the inline one is too short,
// or to the front of the buffer when the frame would run past its end.
func (l *Link) makeRoom(n int) {
	if n > len(l.buf) {
		bp := netx.GetBuf(l.bufSize)
		big := (*bp)[:l.bufSize]
		l.w = copy(big, l.buf[l.r:l.w])
		l.r = 0
		l.buf, l.pooled = big, bp
		return
	}
	if l.r+n > len(l.buf) {
		l.w = copy(l.buf, l.buf[l.r:l.w])
		l.r = 0
	}
}

// fill reads once from the stream after the buffered bytes, which leave
// room. An error that comes with bytes is returned by the next call.
func (l *Link) fill() error {
	if err := l.rerr; err != nil {
		l.rerr = nil
		return err
	}
	for range maxEmptyReads {
		n, err := l.conn.Read(l.buf[l.w:])
		l.w += n
		switch {
		case n > 0:
			l.rerr = err
			return nil
		case err != nil:
			return err
		}
	}
	return io.ErrNoProgress
}

// consume drops the n bytes at the front of what is buffered. Once nothing
// is, the pooled buffer goes back and reading goes on in the inline one.
func (l *Link) consume(n int) {
	l.r += n
	if l.r < l.w {
		return
	}
	l.r, l.w = 0, 0
	l.release()
}

// release gives the pooled buffer back, when the link holds one; nothing
// may be buffered in it.
func (l *Link) release() {
	if l.pooled == nil {
		return
	}
	netx.PutBuf(l.pooled)
	l.pooled = nil
	l.buf = l.inlineBuf()
}

// fail makes err final unless it is a deadline that passed, after which
// reading may go on where it stopped. A link that reads no more gives its
// pooled buffer back.
func (l *Link) fail(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		l.bad = err
		l.r, l.w = 0, 0
		l.release()
	}
	return err
}

// Close closes the stream, which ends a blocked WaitPacket or ReadPacket.
func (l *Link) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.conn.Close() })
	return l.closeErr
}

// Carrier is the stream the link frames its datagrams on
// (netx.Carrier: a commit looks through the link to it).
func (l *Link) Carrier() net.Conn { return l.conn }
