package shadowsocks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"switchyard/netx"
	ss "switchyard/protocol/shadowsocks"
)

// maxDatagram is the largest UDP datagram: a sealed packet, either way, must
// fit a buffer of this size.
const maxDatagram = 65535

// sealRoom is what a sealed packet usually adds to its payload (salt or
// separate header, a few identity headers, the longest address, the tag);
// a packet that needs more is sealed again in a buffer of maxDatagram.
const sealRoom = 512

// packetLink is one UDP session with the server's relay. It keeps no
// datagram buffer of its own: WritePacket seals into a pooled buffer for the
// call, and ReadPacket opens a datagram in place in the buffer it is given
// (or in a pooled one, when that is too short for the datagram). WritePacket
// and ReadPacket run on one goroutine each; WaitPacket is called by the
// reader only, before its ReadPacket; Close may come from a third.
type packetLink struct {
	sock   *net.UDPConn
	server netip.AddrPort
	client *ss.PacketClient
	log    *slog.Logger
	wait   *netx.DatagramWaiter // the reader's; the server's datagrams only
	ready  int                  // the size WaitPacket saw, plus one; 0: none seen; the reader's
	once   sync.Once
	err    error // of Close
}

var (
	_ netx.PacketLink   = (*packetLink)(nil)
	_ netx.PacketWaiter = (*packetLink)(nil)
)

func newPacketLink(sock *net.UDPConn, server netip.AddrPort, client *ss.PacketClient, log *slog.Logger) (*packetLink, error) {
	l := &packetLink{
		sock:   sock,
		server: netip.AddrPortFrom(server.Addr().Unmap(), server.Port()),
		client: client,
		log:    log,
	}
	wait, err := netx.NewDatagramWaiterFrom(sock, l.server, l.dropStranger)
	if err != nil {
		return nil, err
	}
	l.wait = wait
	return l, nil
}

// dropStranger logs a datagram from a sender that is not the server, which
// the wait or ReadPacket dropped.
func (l *packetLink) dropStranger(from netip.AddrPort) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf("shadowsocks udp: dropping a datagram from %s, which is not the server", from))
	}
}

// WritePacket seals p to its destination and sends it to the server. A
// packet whose sealed form exceeds the largest datagram fails with the
// client runtime's text.
func (l *packetLink) WritePacket(p []byte, to netx.Addr) error {
	bp := netx.GetBuf(len(p) + sealRoom)
	defer netx.PutBuf(bp)
	buf := *bp
	if len(buf) > maxDatagram {
		buf = buf[:maxDatagram]
	}
	pkt, err := l.client.Seal(buf, to, p)
	if errors.Is(err, ss.ErrFrameTooLarge) && len(buf) < maxDatagram {
		big := netx.GetBuf(maxDatagram)
		defer netx.PutBuf(big)
		pkt, err = l.client.Seal((*big)[:maxDatagram], to, p)
	}
	if err != nil {
		return fmt.Errorf("shadowsocks udp: %w", err)
	}
	_, err = l.sock.WriteToUDPAddrPort(pkt, l.server)
	return err
}

// WaitPacket blocks until a datagram from the server can be read from the
// socket and returns its size without taking it (netx.PacketWaiter): an
// upper bound of the payload the next ReadPacket returns, which is smaller
// by the packet's header and tag, or is another datagram's when this one
// does not open (see ReadPacket). It fails as ReadPacket would:
// net.ErrClosed after Close. Only the reader calls it, before its
// ReadPacket.
//
// Anyone can send to the socket: a datagram from any other sender is
// dropped inside the wait, with a debug line, and does not wake it. A
// datagram from the server that does not open makes ReadPacket wait for the
// next one with the buffer it was given.
func (l *packetLink) WaitPacket() (int, error) {
	n, err := l.wait.Wait()
	if err != nil {
		l.ready = 0
		return 0, err
	}
	l.ready = n + 1
	return n, nil
}

// ReadPacket returns the next reply, with the address it came from. A
// datagram that is not from the server, or that does not open — forged,
// corrupted, replayed, stale — is dropped with a debug line: anyone can send
// a datagram to this socket, so one bad datagram does not end the link.
//
// The datagram is read and opened in p when p holds it whole (it does when
// its size is the one WaitPacket returned), in a pooled buffer otherwise.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	for {
		size := l.ready - 1
		l.ready = 0
		if size < 0 {
			var err error
			if size, err = l.wait.Wait(); err != nil {
				return 0, netx.Addr{}, err
			}
		}
		if size <= len(p) {
			if n, src, ok, err := l.readInto(p, p); ok || err != nil {
				return n, src, err
			}
			continue
		}
		bp := netx.GetBuf(size)
		n, src, ok, err := l.readInto(*bp, p)
		netx.PutBuf(bp)
		if ok || err != nil {
			return n, src, err
		}
	}
}

// readInto reads one datagram into buf and, when it is the server's and
// opens, copies its payload to p (truncated to p, as UDP does; buf may be
// p). ok is false for a datagram dropped.
func (l *packetLink) readInto(buf, p []byte) (n int, src netx.Addr, ok bool, err error) {
	n, from, err := l.sock.ReadFromUDPAddrPort(buf)
	if err != nil {
		return 0, netx.Addr{}, false, err
	}
	if from.Addr().Unmap() != l.server.Addr() || from.Port() != l.server.Port() {
		l.dropStranger(from)
		return 0, netx.Addr{}, false, nil
	}
	src, payload, err := l.client.Open(buf[:n])
	if err != nil {
		l.log.Debug(fmt.Sprintf("shadowsocks udp: dropping a datagram from the server: %v", err))
		return 0, netx.Addr{}, false, nil
	}
	return copy(p, payload), src, true, nil
}

// Close closes the socket, which ends a pending WaitPacket or ReadPacket.
func (l *packetLink) Close() error {
	l.once.Do(func() { l.err = l.sock.Close() })
	return l.err
}
