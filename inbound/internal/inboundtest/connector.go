// Package inboundtest holds the fakes the inbound tests share: a Connector
// that dials real loopback sockets and records every flow, and echo servers.
package inboundtest

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"switchyard/inbound"
	"switchyard/netx"
)

// Connector records the flows it is handed. ConnectStream dials the flow's
// destination with net.Dial (or fails with Err when set); OpenAssociation
// opens a Link on a real UDP socket on 127.0.0.1.
type Connector struct {
	t   testing.TB
	Err error // returned by ConnectStream instead of dialing; set before use

	mu    sync.Mutex // guards flows and links
	flows []netx.Flow
	links []*Link
}

var _ inbound.Connector = (*Connector)(nil)

// NewConnector returns a Connector; links left open are closed at cleanup.
func NewConnector(t testing.TB) *Connector {
	c := &Connector{t: t}
	t.Cleanup(func() {
		for _, l := range c.Links() {
			l.Close()
		}
	})
	return c
}

func (c *Connector) ConnectStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	c.mu.Lock()
	c.flows = append(c.flows, f)
	c.mu.Unlock()
	if c.Err != nil {
		return nil, c.Err
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.Dst.String())
}

func (c *Connector) OpenAssociation(f netx.Flow) netx.PacketLink {
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:0")))
	if err != nil {
		c.t.Errorf("association socket: %v", err)
	}
	l := &Link{Flow: f, pc: pc, closed: make(chan struct{})}
	if pc == nil {
		l.Close()
	}
	c.mu.Lock()
	c.flows = append(c.flows, f)
	c.links = append(c.links, l)
	c.mu.Unlock()
	return l
}

// Flows returns the flows handed over so far.
func (c *Connector) Flows() []netx.Flow {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]netx.Flow(nil), c.flows...)
}

// Links returns the associations opened so far.
func (c *Connector) Links() []*Link {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Link(nil), c.links...)
}

// Link is one association's link: a plain UDP socket that sends each packet
// to its own peer.
type Link struct {
	Flow   netx.Flow
	pc     *net.UDPConn
	once   sync.Once
	closed chan struct{}
	writes atomic.Int64
}

func (l *Link) WritePacket(p []byte, to netx.Addr) error {
	l.writes.Add(1)
	ap, ok := to.AddrPort()
	if !ok {
		ua, err := net.ResolveUDPAddr("udp4", to.String())
		if err != nil {
			return err
		}
		ap = ua.AddrPort()
	}
	_, err := l.pc.WriteToUDPAddrPort(p, ap)
	return err
}

func (l *Link) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.pc.ReadFromUDPAddrPort(p)
	return n, netx.AddrFromAddrPort(from), err
}

func (l *Link) Close() error {
	l.once.Do(func() {
		if l.pc != nil {
			l.pc.Close()
		}
		close(l.closed)
	})
	return nil
}

// Writes counts the calls to WritePacket.
func (l *Link) Writes() int64 { return l.writes.Load() }

// Closed is closed once Close has been called.
func (l *Link) Closed() <-chan struct{} { return l.closed }
