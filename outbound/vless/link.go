package vless

import (
	"bufio"
	"net"
	"sync"

	"switchyard/netx"
	codec "switchyard/protocol/vless"
)

// packetLink is a VLESS UDP stream toward one target: each packet, both
// ways, is a length and the payload. WritePacket, ReadPacket and Close may
// each run on their own goroutine.
type packetLink struct {
	conn   net.Conn
	target netx.Addr // the destination the request named

	stage []byte // writer side: the buffer a packet is sealed in

	r frameReader // reader side

	closeOnce sync.Once
	closeErr  error
}

var _ netx.PacketLink = (*packetLink)(nil)

func newPacketLink(c net.Conn, target netx.Addr) *packetLink {
	return &packetLink{
		conn:   c,
		target: target,
		stage:  make([]byte, 0, BufSize),
		r:      frameReader{br: bufio.NewReaderSize(c, BufSize)},
	}
}

// WritePacket sends p in one write to the link's target: the request named
// it, so the packet's own peer is not carried. A packet whose payload and
// the request header's reserve exceed the buffer is refused.
func (l *packetLink) WritePacket(p []byte, _ netx.Addr) error {
	if len(p)+codec.RequestHeaderMax > BufSize {
		return errDatagramTooLarge
	}
	b, err := codec.AppendPacket(l.stage[:0], p)
	if err != nil {
		return err
	}
	_, err = l.conn.Write(b)
	return err
}

// ReadPacket returns the next packet, truncated to p, from the link's target.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	frame, err := l.r.next(codec.PacketLen)
	if err != nil {
		return 0, netx.Addr{}, err
	}
	n := copy(p, frame[codec.PacketHeaderLen:])
	l.r.consume(len(frame))
	return n, l.target, nil
}

// Close closes the server connection, which ends a blocked ReadPacket.
func (l *packetLink) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.conn.Close() })
	return l.closeErr
}
