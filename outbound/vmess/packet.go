package vmess

import (
	"fmt"
	"net"
	"sync"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	protocol "switchyard/protocol/vmess"
)

// packetLink is a UDP link through VMess: one chunk per datagram, all to the
// one target the request header named. WritePacket is called from one
// goroutine and ReadPacket from another; WaitPacket is called by the reader
// only, before its ReadPacket; Close may come from any.
//
// An idle link holds its reader's small buffer (releasingStart) alone: a chunk is
// sealed in a pooled buffer taken for the write, and a chunk too large for
// the small buffer is read into a pooled one, given back once passed on.
type packetLink struct {
	conn   net.Conn
	target netx.Addr

	rd      frameReader
	pending []byte // the payload WaitPacket decoded, in rd's buffer; nil: none

	enc  *protocol.Encoder
	werr error

	closeOnce sync.Once
	closeErr  error
}

func newPacketLink(c net.Conn, s *protocol.Session, target netx.Addr) *packetLink {
	return &packetLink{
		conn:   c,
		target: target,
		rd:     newReleasingReader(c, s),
		enc:    s.NewEncoder(),
	}
}

// WritePacket sends p to the link's target; to is not used, since the
// request header named the target. An empty datagram cannot be sent (an
// empty chunk ends the body): it is dropped. A datagram is one chunk, and
// one longer than a chunk carries (8,111 to 8,190 bytes by security, as
// Xray's client sizes them) is refused.
func (l *packetLink) WritePacket(p []byte, _ netx.Addr) error {
	if l.werr != nil {
		return l.werr
	}
	if len(p) == 0 {
		return nil
	}
	if len(p) > l.enc.MaxPayload() {
		return fmt.Errorf("vmess: %w (a datagram of %d bytes; one chunk carries %d)", proxyconn.ErrFrameTooLarge, len(p), l.enc.MaxPayload())
	}
	bp := netx.GetBuf(len(p) + protocol.ChunkOverhead) // one chunk: a datagram's whole frame
	defer netx.PutBuf(bp)
	buf, err := l.enc.Seal((*bp)[:0], p)
	if err == nil {
		_, err = l.conn.Write(buf)
	}
	if err != nil {
		l.werr = err
	}
	return err
}

var (
	_ netx.PacketLink   = (*packetLink)(nil)
	_ netx.PacketWaiter = (*packetLink)(nil)
)

// WaitPacket blocks until the next datagram's chunk is read and opened, and
// returns the exact size of its payload (netx.PacketWaiter); the payload
// stays in the link's read buffer for the next ReadPacket. It fails as
// ReadPacket would. Only the reader calls it, before its ReadPacket.
func (l *packetLink) WaitPacket() (int, error) {
	if l.pending == nil {
		payload, err := l.rd.next()
		if err != nil {
			return 0, err
		}
		l.pending = payload
	}
	return len(l.pending), nil
}

// ReadPacket returns the next datagram from the target. A datagram longer
// than p is cut to p's length, as a UDP socket does.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	payload := l.pending
	l.pending = nil
	if payload == nil {
		var err error
		if payload, err = l.rd.next(); err != nil {
			return 0, netx.Addr{}, err
		}
	}
	return copy(p, payload), l.target, nil
}

// Close closes the upstream, which ends a pending WaitPacket or ReadPacket; it is
// idempotent.
func (l *packetLink) Close() error {
	l.closeOnce.Do(func() { l.closeErr = l.conn.Close() })
	return l.closeErr
}

// Carrier is the transport's stream under the link's datagrams
// (netx.Carrier).
func (l *packetLink) Carrier() net.Conn { return l.conn }
