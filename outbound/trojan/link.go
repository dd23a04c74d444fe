package trojan

import (
	"bufio"
	"errors"
	"net"
	"os"
	"sync"

	"switchyard/netx"
	codec "switchyard/protocol/trojan"
)

// packetLink is a UDP ASSOCIATE stream: every packet, both ways, is the
// peer's address, a length, CRLF and the payload. WritePacket, ReadPacket
// and Close may each run on their own goroutine.
type packetLink struct {
	conn net.Conn

	// Writer side: the staging buffer a packet is sealed in.
	stage []byte

	// Reader side.
	br     *bufio.Reader
	parser codec.PacketParser
	bad    error // the error that ended reading; final

	closeOnce sync.Once
	closeErr  error
}

var _ netx.PacketLink = (*packetLink)(nil)

func newPacketLink(c net.Conn) *packetLink {
	return &packetLink{
		conn:  c,
		stage: make([]byte, 0, BufSize),
		br:    bufio.NewReaderSize(c, BufSize),
	}
}

// WritePacket sends p to peer in one write. A packet whose payload and the
// request header's reserve exceed the buffer is refused.
func (l *packetLink) WritePacket(p []byte, peer netx.Addr) error {
	if len(p)+codec.RequestHeaderMax > BufSize {
		return errDatagramTooLarge
	}
	b, err := codec.AppendPacket(l.stage[:0], peer, p)
	if err != nil {
		return err
	}
	_, err = l.conn.Write(b)
	return err
}

// ReadPacket returns the next packet from the server, truncated to p, with
// the peer it came from.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	if l.bad != nil {
		return 0, netx.Addr{}, l.bad
	}
	frame, err := peekFrame(l.br, codec.PacketLen)
	if err != nil {
		l.fail(err)
		return 0, netx.Addr{}, err
	}
	peer, payload, err := l.parser.Parse(frame)
	if err != nil {
		l.fail(err)
		return 0, netx.Addr{}, err
	}
	n := copy(p, payload)
	l.br.Discard(len(frame))
	return n, peer, nil
}

// fail makes err final unless it is a deadline that passed, after which
// reading may go on where it stopped.
func (l *packetLink) fail(err error) {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		l.bad = err
	}
}

// Close closes the server connection, which ends a blocked ReadPacket.
func (l *packetLink) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.conn.Close() })
	return l.closeErr
}
