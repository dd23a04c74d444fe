package probe

import (
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"switchyard/netx"
)

// linkConn is a net.PacketConn on a node's packet link, for a QUIC client
// that talks to one peer through it: every datagram written goes to the
// peer, every datagram read is reported as the peer's (the link carries
// this probe's session alone, and QUIC authenticates what it accepts).
//
// A PacketLink has no deadline, so one goroutine, the pump, reads the link
// and hands each datagram over; ReadFrom waits for it, the read deadline
// or Close. Close closes the link, which ends the pump's read, and waits
// for the pump. Writes go straight to the link, which sends a datagram
// without waiting for the peer: the write deadline bounds nothing there.
type linkConn struct {
	link netx.PacketLink
	dst  netx.Addr // the peer, as the link is told
	peer net.Addr  // the peer, as QUIC is told

	in     chan []byte   // datagrams from the pump
	failed chan struct{} // closed when the link's read failed
	err    error         // that failure; read after failed is closed
	closed chan struct{} // closed by Close
	pumped chan struct{} // closed when the pump returned
	once   sync.Once

	dl deadline // the read deadline
}

// maxDatagram is the pump's buffer: any UDP payload fits.
const maxDatagram = 64 << 10

func newLinkConn(link netx.PacketLink, peer netx.Addr) *linkConn {
	c := &linkConn{
		link:   link,
		dst:    peer,
		peer:   peerAddr(peer),
		in:     make(chan []byte),
		failed: make(chan struct{}),
		closed: make(chan struct{}),
		pumped: make(chan struct{}),
	}
	c.dl.init()
	go c.pump()
	return c
}

func (c *linkConn) pump() {
	defer close(c.pumped)
	buf := make([]byte, maxDatagram)
	for {
		n, _, err := c.link.ReadPacket(buf)
		if err != nil {
			c.err = err
			close(c.failed)
			return
		}
		select {
		case c.in <- append([]byte(nil), buf[:n]...):
		case <-c.closed:
			return
		}
	}
}

// ReadFrom returns the next datagram (truncated to p, as a UDP socket
// would), attributed to the peer. A read past the deadline fails with
// os.ErrDeadlineExceeded; after Close with net.ErrClosed; after the link
// failed with its error.
func (c *linkConn) ReadFrom(p []byte) (int, net.Addr, error) {
	select {
	case <-c.closed:
		return 0, nil, net.ErrClosed
	default:
	}
	select {
	case d := <-c.in:
		return copy(p, d), c.peer, nil
	case <-c.failed:
		return 0, nil, c.err
	case <-c.closed:
		return 0, nil, net.ErrClosed
	case <-c.dl.wait():
		return 0, nil, os.ErrDeadlineExceeded
	}
}

// WriteTo sends p to the peer, whatever addr says.
func (c *linkConn) WriteTo(p []byte, _ net.Addr) (int, error) {
	select {
	case <-c.closed:
		return 0, net.ErrClosed
	default:
	}
	if err := c.link.WritePacket(p, c.dst); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close closes the link and waits for the pump to return.
func (c *linkConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.closed)
		err = c.link.Close()
		<-c.pumped
		c.dl.stop()
	})
	return err
}

// LocalAddr is unspecified: the probe's end of the link is the node's.
func (c *linkConn) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4zero} }

func (c *linkConn) SetDeadline(t time.Time) error     { return c.SetReadDeadline(t) }
func (c *linkConn) SetReadDeadline(t time.Time) error { c.dl.set(t); return nil }
func (c *linkConn) SetWriteDeadline(time.Time) error  { return nil }
func (c *linkConn) SetReadBuffer(int) error           { return nil } // the link's buffers are its carrier's
func (c *linkConn) SetWriteBuffer(int) error          { return nil }

// peerAddr is a as a net.Addr: a *net.UDPAddr for an IP, a nameAddr for a
// name the node resolves.
func peerAddr(a netx.Addr) net.Addr {
	if a.IP.IsValid() {
		return net.UDPAddrFromAddrPort(netip.AddrPortFrom(a.IP, a.Port))
	}
	return nameAddr{a}
}

// nameAddr is a host name and port as a net.Addr.
type nameAddr struct{ a netx.Addr }

func (n nameAddr) Network() string { return "udp" }
func (n nameAddr) String() string  { return n.a.String() }

// deadline is a read deadline as a channel closed when it passes.
type deadline struct {
	mu    sync.Mutex
	ch    chan struct{}
	timer *time.Timer
}

func (d *deadline) init() { d.ch = make(chan struct{}) }

// set arms the deadline at t: the zero time disarms it, a past time
// expires it at once.
func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.ch // the timer closed it: wait for nothing, it is closed
	}
	d.timer = nil
	select {
	case <-d.ch:
		d.ch = make(chan struct{}) // expired before: a fresh one
	default:
	}
	if t.IsZero() {
		return
	}
	if wait := time.Until(t); wait > 0 {
		ch := d.ch
		d.timer = time.AfterFunc(wait, func() { close(ch) })
		return
	}
	close(d.ch)
}

func (d *deadline) wait() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.ch
}

func (d *deadline) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
