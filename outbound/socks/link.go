package socks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/protocol/socks5"
)

// Buffer sizes of one association. A datagram from the relay is read into
// the reader's own buffer, and one toward it is framed in a pooled buffer
// taken for the send: the link keeps none of a datagram's size.
const (
	sinkSize  = 256                        // what the control connection is drained into
	shortSize = 2 * socks5.MaxUDPHeaderLen // a datagram read for a buffer too short for a header
)

// The largest UDP payload one datagram carries over IPv4 and over IPv6.
const (
	maxDatagram4 = 65535 - 20 - 8
	maxDatagram6 = 65535 - 8
)

// link is one association: a UDP socket toward the relay, kept alive by the
// control connection it was set up on. Every datagram carries a SOCKS5 UDP
// header naming its own peer.
//
// WritePacket, ReadPacket and Close may run concurrently, one goroutine
// each; WaitPacket is called by the reader only, before its ReadPacket. A
// goroutine of the link's own drains the control connection until
// it ends or Close closes it.
type link struct {
	control  net.Conn
	udp      *net.UDPConn
	relay    netip.AddrPort // unmapped
	maxFrame int

	wait   *netx.DatagramWaiter // the reader's alone; the relay's datagrams only
	short  [shortSize]byte      // the reader's alone
	parser socks5.UDPParser     // the reader's alone
	log    *slog.Logger

	ended   atomic.Bool // the control connection ended
	mu      sync.Mutex  // guards pending
	pending error       // a control read error not yet returned

	closed    atomic.Bool
	closeOnce sync.Once
	watched   chan struct{} // closed when the control drain returns
}

var (
	_ netx.PacketLink   = (*link)(nil)
	_ netx.PacketWaiter = (*link)(nil)
)

// newLink returns the association over control whose datagrams go to and
// come from relay (unmapped) through udp. Datagrams from anyone else are
// dropped while the reader waits, with a debug line on log.
func newLink(control net.Conn, udp *net.UDPConn, relay netip.AddrPort, log *slog.Logger) (*link, error) {
	l := &link{
		control:  control,
		udp:      udp,
		relay:    relay,
		maxFrame: maxDatagram4,
		log:      log,
		watched:  make(chan struct{}),
	}
	wait, err := netx.NewDatagramWaiterFrom(udp, relay, l.dropped)
	if err != nil {
		return nil, err
	}
	l.wait = wait
	if relay.Addr().Is6() {
		l.maxFrame = maxDatagram6
	}
	go l.drain()
	return l, nil
}

// dropped logs a datagram the wait dropped, from a sender that is not the
// relay.
func (l *link) dropped(from netip.AddrPort) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf("socks udp: dropping a datagram from %s, which is not the relay", from))
	}
}

// drain reads the control connection into a sink until it ends. Its end,
// unless Close caused it, ends the association: a blocked ReadPacket is
// woken, and every later call fails.
func (l *link) drain() {
	defer close(l.watched)
	var sink [sinkSize]byte
	for {
		_, err := l.control.Read(sink[:])
		if err == nil {
			continue
		}
		if l.closed.Load() {
			return
		}
		if err != io.EOF {
			l.mu.Lock()
			l.pending = netx.WithFault(err, netx.FaultSharedSource)
			l.mu.Unlock()
		}
		l.ended.Store(true)
		l.udp.SetReadDeadline(netx.LongAgo)
		return
	}
}

// controlEnded is the error controlErr would return next, without taking
// it: nil while the control connection is open.
func (l *link) controlEnded() error {
	if !l.ended.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pending != nil {
		return l.pending
	}
	return ErrControlClosed
}

// controlErr is nil while the control connection is open. Once it ended, a
// read error is returned once as it is, and ErrControlClosed every time
// after (and at once for an end of stream).
func (l *link) controlErr() error {
	if !l.ended.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.pending; err != nil {
		l.pending = nil
		return err
	}
	return ErrControlClosed
}

// WritePacket sends p to the relay with a header naming to.
func (l *link) WritePacket(p []byte, to netx.Addr) error {
	if l.closed.Load() {
		return net.ErrClosed
	}
	if err := l.controlErr(); err != nil {
		return err
	}
	if err := socks5.CheckAddr(to); err != nil {
		return err
	}
	if len(p) > l.maxFrame {
		return proxyconn.ErrFrameTooLarge
	}
	bp := netx.GetBuf(socks5.MaxUDPHeaderLen + len(p))
	defer netx.PutBuf(bp)
	frame := socks5.AppendUDP((*bp)[:0], to, p)
	if len(frame) > l.maxFrame {
		return proxyconn.ErrFrameTooLarge
	}
	if _, err := l.udp.WriteToUDPAddrPort(frame, l.relay); err != nil {
		if l.closed.Load() {
			return net.ErrClosed
		}
		return err
	}
	return nil
}

// WaitPacket blocks until a datagram from the relay can be read and returns
// its size, without taking it (netx.PacketWaiter). The socket is not
// connected, so the kernel lets through datagrams from any source: those of
// anyone but the relay are dropped inside the wait (with a debug line), and
// do not wake it. The size is an upper bound of what the next ReadPacket
// returns: it counts the SOCKS5 header, and a datagram whose header does
// not parse is skipped, ReadPacket then waiting for the next one with the
// buffer it was given. It fails with the error the next ReadPacket would
// return: net.ErrClosed after Close, the control connection's end once it
// ended. Only the reader calls it, before its ReadPacket.
func (l *link) WaitPacket() (int, error) {
	if l.closed.Load() {
		return 0, net.ErrClosed
	}
	if err := l.controlEnded(); err != nil {
		return 0, err
	}
	n, err := l.wait.Wait()
	if err != nil {
		if l.closed.Load() {
			return 0, net.ErrClosed
		}
		if cerr := l.controlEnded(); cerr != nil {
			return 0, cerr
		}
		return 0, err
	}
	return n, nil
}

// ReadPacket returns the payload of the next datagram from the relay and
// the peer its header names. Datagrams from any other source and datagrams
// whose header does not parse are skipped; a payload longer than p is
// truncated, as UDP does. The datagram is read into p itself, so p of the
// size WaitPacket returned holds it whole; a p too short for a header is
// read through a small buffer of the link's.
func (l *link) ReadPacket(p []byte) (int, netx.Addr, error) {
	buf := p
	if len(p) < socks5.MaxUDPHeaderLen {
		buf = l.short[:]
	}
	for {
		if l.closed.Load() {
			return 0, netx.Addr{}, net.ErrClosed
		}
		if err := l.controlErr(); err != nil {
			return 0, netx.Addr{}, err
		}
		n, from, err := l.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			if l.closed.Load() {
				return 0, netx.Addr{}, net.ErrClosed
			}
			if cerr := l.controlErr(); cerr != nil {
				return 0, netx.Addr{}, cerr
			}
			return 0, netx.Addr{}, err
		}
		if netip.AddrPortFrom(from.Addr().Unmap(), from.Port()) != l.relay {
			continue
		}
		peer, payload, err := l.parser.Parse(buf[:n])
		if err != nil {
			continue
		}
		return copy(p, payload), peer, nil
	}
}

// Close closes the control connection and the relay socket and waits for
// the control drain. It is idempotent; the first call returns the close
// errors joined.
func (l *link) Close() error {
	var err error
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		err = errors.Join(l.control.Close(), l.udp.Close())
		<-l.watched
	})
	return err
}
