package proxyconn

import (
	"bufio"
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

// Link is a datagram link over one established stream: every packet, both
// ways, is a frame of its Framing. WritePacket, ReadPacket and Close may
// each run on their own goroutine; WaitPacket is called by the reader only,
// before its ReadPacket.
type Link struct {
	conn    net.Conn
	framing Framing
	reserve int // what sealing may add to a payload in the staging buffer

	stage []byte // writer side: the buffer a packet is sealed in

	// Reader side.
	br  *bufio.Reader
	bad error // the error that ended reading; final

	// The packet WaitPacket opened, still buffered in br, for ReadPacket.
	pending  bool
	payload  []byte // aliases br's buffer
	from     netx.Addr
	frameLen int

	closeOnce sync.Once
	closeErr  error
}

var (
	_ netx.PacketLink   = (*Link)(nil)
	_ netx.PacketWaiter = (*Link)(nil)
)

// NewLink returns the link over c. bufSize sizes both of its buffers, so it
// bounds one frame each way; a packet whose payload and reserve (the
// codec's staging reserve) exceed it is refused with ErrFrameTooLarge.
func NewLink(c net.Conn, f Framing, bufSize, reserve int) *Link {
	return &Link{
		conn:    c,
		framing: f,
		reserve: reserve,
		stage:   make([]byte, 0, bufSize),
		br:      bufio.NewReaderSize(c, bufSize),
	}
}

// WritePacket sends p toward to in one frame and one write.
func (l *Link) WritePacket(p []byte, to netx.Addr) error {
	if len(p)+l.reserve > cap(l.stage) {
		return ErrFrameTooLarge
	}
	b, err := l.framing.AppendFrame(l.stage[:0], p, to)
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
	l.br.Discard(l.frameLen)
	l.pending, l.payload, l.from = false, nil, netx.Addr{}
	return n, from, nil
}

// open makes the next packet pending, unless one is: it reads frames until
// one carries a packet, and skips the others.
func (l *Link) open() error {
	for !l.pending {
		if l.bad != nil {
			return l.bad
		}
		frame, err := l.peekFrame()
		if err != nil {
			return l.fail(err)
		}
		payload, from, ok, err := l.framing.OpenFrame(frame)
		if err != nil {
			return l.fail(err)
		}
		if !ok {
			l.br.Discard(len(frame))
			continue
		}
		l.pending, l.payload, l.from, l.frameLen = true, payload, from, len(frame)
	}
	return nil
}

// peekFrame returns the next whole frame buffered in br, as the framing
// sizes it; the bytes stay valid until br is read again. A frame that cannot
// fit the buffer is ErrUpstreamFrameTooLarge; an end of stream before the
// first byte of a frame is io.EOF, inside one ErrFrameClosed.
func (l *Link) peekFrame() ([]byte, error) {
	need := 1
	for {
		if n := l.br.Buffered(); n > need {
			need = n
		}
		b, err := l.br.Peek(need)
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			return nil, ErrUpstreamFrameTooLarge
		case err == io.EOF && len(b) == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, ErrFrameClosed
		case err != nil:
			return nil, err
		}
		n, err := l.framing.FrameLen(b)
		if err != nil {
			return nil, err
		}
		if n <= len(b) {
			return b[:n], nil
		}
		need = n
	}
}

// fail makes err final unless it is a deadline that passed, after which
// reading may go on where it stopped.
func (l *Link) fail(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		l.bad = err
	}
	return err
}

// Close closes the stream, which ends a blocked WaitPacket or ReadPacket.
func (l *Link) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.conn.Close() })
	return l.closeErr
}
