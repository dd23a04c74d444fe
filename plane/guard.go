package plane

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"

	"switchyard/netx"
)

// guardedConn fails with ErrDrained once its target's flows are closed. It
// only observes bytes, so a relay may splice beneath it.
type guardedConn struct {
	net.Conn
	t       *Target
	drained atomic.Bool
	once    sync.Once
}

var _ netx.Observed = (*guardedConn)(nil)

func (g *guardedConn) drain() {
	g.drained.Store(true)
	g.Conn.Close()
}

func (g *guardedConn) err(err error) error {
	if err != nil && g.drained.Load() {
		return ErrDrained
	}
	return err
}

func (g *guardedConn) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	return n, g.err(err)
}

func (g *guardedConn) Write(p []byte) (int, error) {
	n, err := g.Conn.Write(p)
	return n, g.err(err)
}

// errNoHalfClose is the CloseWrite of a conn that cannot half-close: the
// caller closes it whole instead.
var errNoHalfClose = errors.New("the connection cannot half-close")

// CloseWrite half-closes the inner conn when it can.
func (g *guardedConn) CloseWrite() error {
	if cw, ok := g.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

func (g *guardedConn) Close() error {
	g.once.Do(func() { g.t.remove(g) })
	return g.Conn.Close()
}

func (g *guardedConn) NetConn() net.Conn  { return g.Conn }
func (g *guardedConn) ObserveRead(int64)  {}
func (g *guardedConn) ObserveWrite(int64) {}

// guardedLink is the datagram form of guardedConn.
type guardedLink struct {
	link    netx.PacketLink
	t       *Target
	drained atomic.Bool
	once    sync.Once
}

func (g *guardedLink) drain() {
	g.drained.Store(true)
	g.link.Close()
}

func (g *guardedLink) err(err error) error {
	if err != nil && g.drained.Load() {
		return ErrDrained
	}
	return err
}

func (g *guardedLink) WritePacket(p []byte, to netx.Addr) error {
	if g.drained.Load() {
		return ErrDrained
	}
	return g.err(g.link.WritePacket(p, to))
}

// WritePackets sends ps to to in one go where the inner link can
// (netx.PacketBatchWriter).
func (g *guardedLink) WritePackets(ps [][]byte, to netx.Addr) (int, error) {
	if g.drained.Load() {
		return 0, ErrDrained
	}
	n, err := netx.WritePackets(g.link, ps, to)
	return n, g.err(err)
}

func (g *guardedLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := g.link.ReadPacket(p)
	return n, from, g.err(err)
}

// WaitPacket waits for the inner link's next datagram without taking it
// (netx.PacketWaiter); ReadPacket then reports a drain.
func (g *guardedLink) WaitPacket() (int, error) { return netx.WaitPacket(g.link) }

// NotifyIdle forwards to the inner link (netx.IdleNotifier).
func (g *guardedLink) NotifyIdle(idle func()) bool { return netx.NotifyIdle(g.link, idle) }

func (g *guardedLink) Close() error {
	g.once.Do(func() { g.t.remove(g) })
	return g.link.Close()
}

// PollSources forwards the inner link's, with a drain reported as
// ReadPacket reports it (netx.PollableLink).
func (g *guardedLink) PollSources(closed func()) []netx.PollSource {
	srcs := netx.PollSourcesOf(g.link, closed)
	for i := range srcs {
		read := srcs[i].Read
		srcs[i].Read = func(p []byte) (int, netx.Addr, error) {
			n, from, err := read(p)
			return n, from, g.err(err)
		}
	}
	return srcs
}
