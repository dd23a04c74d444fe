package hysteria2

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"

	"github.com/apernet/hysteria/core/v2/client"

	"switchyard/internal/slot"
	"switchyard/netx"
)

// packetLink is a UDP session on the connection: each packet carries its
// peer's address, and core/v2 fragments and reassembles what exceeds one
// QUIC datagram. WritePacket is called from one goroutine, ReadPacket from
// another, Close from any; WaitPacket is called by the reader only, before
// its ReadPacket.
type packetLink struct {
	udp    client.HyUDPConn
	res    *slot.Res[*conn] // the link's hold on its connection
	conn   *conn            // res.V
	out    *Outbound
	closed atomic.Bool
	gone   atomic.Bool // the session ended with its connection
	names  authorities // WritePacket's own

	// The reply WaitPacket received, for ReadPacket: core/v2 gives each
	// reply a slice of its own, so it is kept as it is.
	pending     bool
	pendingData []byte
	pendingFrom netx.Addr
}

var (
	_ netx.PacketLink   = (*packetLink)(nil)
	_ netx.PacketWaiter = (*packetLink)(nil)
	_ netx.Committer    = (*packetLink)(nil)
)

func newPacketLink(u client.HyUDPConn, r *slot.Res[*conn], o *Outbound) *packetLink {
	return &packetLink{udp: u, res: r, conn: r.V, out: o}
}

// WritePacket sends p to its peer. A message that does not fit the
// session's send buffer fails without being sent.
func (l *packetLink) WritePacket(p []byte, to netx.Addr) error {
	if l.closed.Load() {
		return net.ErrClosed
	}
	if l.gone.Load() || l.conn.dead() {
		// quic-go drops a datagram sent on a closed connection silently.
		return l.conn.lost()
	}
	addr := l.names.format(to)
	if udpHeaderSize(addr)+len(p) > maxUDPSize {
		return errDatagramTooLarge
	}
	err := l.udp.Send(p, addr)
	switch {
	case err == nil:
		return nil
	case noDatagramSupport(err):
		l.conn.noDatagrams.Store(true)
		l.out.refuseUDP(errNoDatagrams)
		return errNoDatagrams
	case connectionGone(err):
		lost := l.conn.lost() // before Lost closes the connection
		l.out.slot.Lost(l.res)
		return lost
	}
	return fmt.Errorf("hysteria2: sending to %s: %w", to, err)
}

// WaitPacket blocks until the next reply is received and returns its exact
// size (netx.PacketWaiter); the reply is kept for the next ReadPacket. It
// fails as ReadPacket would. Only the reader calls it, before its
// ReadPacket.
func (l *packetLink) WaitPacket() (int, error) {
	if !l.pending {
		data, from, err := l.receive()
		if err != nil {
			return 0, err
		}
		l.pending, l.pendingData, l.pendingFrom = true, data, from
	}
	return len(l.pendingData), nil
}

// ReadPacket returns the next reply with the peer it came from. A reply
// whose source does not parse, or has port 0, is skipped. Once the
// connection is gone the link fails for good.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	data, from := l.pendingData, l.pendingFrom
	if l.pending {
		l.pending, l.pendingData, l.pendingFrom = false, nil, netx.Addr{}
	} else {
		var err error
		if data, from, err = l.receive(); err != nil {
			return 0, netx.Addr{}, err
		}
	}
	if len(data) > len(p) {
		return 0, from, errFrameTooLarge
	}
	return copy(p, data), from, nil
}

// receive returns the next reply whose source parses.
func (l *packetLink) receive() ([]byte, netx.Addr, error) {
	for {
		data, addr, err := l.udp.Receive()
		if err != nil {
			if l.closed.Load() {
				return nil, netx.Addr{}, net.ErrClosed
			}
			// Only the connection's end closes a session this link did not.
			l.gone.Store(true)
			lost := l.conn.lost() // before Lost closes the connection
			l.out.slot.Lost(l.res)
			return nil, netx.Addr{}, lost
		}
		if from, ok := parseAuthority(addr); ok {
			return data, from, nil
		}
	}
}

// Close ends the session; a pending WaitPacket or ReadPacket returns
// net.ErrClosed. The connection stays up for the other flows; a purged one
// closes once this was its last.
func (l *packetLink) Close() error {
	if l.closed.CompareAndSwap(false, true) {
		err := l.udp.Close()
		l.res.Release()
		return err
	}
	return nil
}

// Commit publishes the connection of a link a speculative dial opened on a
// connection of its own (netx.Committer): it becomes the slot's when the
// slot has none in service and none connecting, for every later flow;
// otherwise it stays this link's alone and closes with it. On a link of
// the shared connection it does nothing.
func (l *packetLink) Commit(context.Context) {
	if !l.closed.Load() && l.out.slot.Adopt(l.res) {
		l.out.log.Debug("hysteria2: the speculative connection of the chosen candidate is now the shared one")
	}
}

// ServerFamily is the address family of the server address the session's
// connection runs to.
func (l *packetLink) ServerFamily() (netx.Family, bool) { return l.conn.family() }

// noDatagramSupport reports the refusal quic-go gives a datagram sent on a
// connection whose peer did not advertise QUIC datagrams. quic-go has no
// sentinel for it; the text is its own, from the pinned version.
func noDatagramSupport(err error) bool {
	return err != nil && err.Error() == "datagram support disabled"
}
