package fanout_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
)

// udpOutbound opens a real loopback UDP socket per sub-link and sends each
// packet to its own address, as direct does.
type udpOutbound struct {
	opens atomic.Int32
}

var _ outbound.Outbound = (*udpOutbound)(nil)

func (o *udpOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("udpOutbound dials no streams")
}

func (o *udpOutbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, err
	}
	o.opens.Add(1)
	return &udpLink{c: c}, nil
}

type udpLink struct{ c *net.UDPConn }

func (l *udpLink) WritePacket(p []byte, to netx.Addr) error {
	ap, ok := to.AddrPort()
	if !ok {
		return errors.New("udpLink sends to IPs only")
	}
	_, err := l.c.WriteToUDPAddrPort(p, ap)
	return err
}

func (l *udpLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.c.ReadFromUDPAddrPort(p)
	return n, netx.AddrFromAddrPort(from), err
}

func (l *udpLink) Close() error { return l.c.Close() }

// scriptedOutbound hands out scriptedLinks and remembers them.
type scriptedOutbound struct {
	openErr error // DialPacket fails with it when set
	sendErr error // every link's WritePacket fails with it when set
	// replies, when set, is what a link answers to each packet it is sent.
	replies func(p []byte, to netx.Addr) []datagram
	// flood, when set, is returned by every ReadPacket at once, for ever.
	flood *datagram
	// linger is how long a ReadPacket waiting when its link is closed takes
	// to return.
	linger time.Duration
	// gate, when set, holds every DialPacket until it is closed.
	gate chan struct{}
	// forget, when set, keeps links from recording the payloads sent.
	forget bool

	dials atomic.Int32 // DialPacket calls, failed ones included
	mu    sync.Mutex
	links []*scriptedLink
}

var _ outbound.Outbound = (*scriptedOutbound)(nil)

type datagram struct {
	payload string
	from    netx.Addr
}

func (o *scriptedOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("scriptedOutbound dials no streams")
}

func (o *scriptedOutbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	o.dials.Add(1)
	if o.gate != nil {
		select {
		case <-o.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if o.openErr != nil {
		return nil, o.openErr
	}
	l := &scriptedLink{out: o, opened: f, in: make(chan datagram, 64), done: make(chan struct{})}
	o.mu.Lock()
	o.links = append(o.links, l)
	o.mu.Unlock()
	return l, nil
}

// opened returns the links opened so far.
func (o *scriptedOutbound) opened() []*scriptedLink {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*scriptedLink(nil), o.links...)
}

// scriptedLink swallows writes (or fails them with the outbound's sendErr)
// and blocks in ReadPacket until it has a reply to give or is closed, like a
// blackhole link when nothing is scripted.
type scriptedLink struct {
	out    *scriptedOutbound
	opened netx.Flow
	in     chan datagram
	sent   atomic.Int32
	mu     sync.Mutex
	got    []string     // the payloads sent, in order
	reads  atomic.Int32 // datagrams ReadPacket returned
	closes atomic.Int32
	ended  atomic.Bool // a ReadPacket returned because the link was closed
	once   sync.Once
	done   chan struct{}
}

func (l *scriptedLink) WritePacket(p []byte, to netx.Addr) error {
	if l.out.sendErr != nil {
		return l.out.sendErr
	}
	l.sent.Add(1)
	if !l.out.forget {
		l.mu.Lock()
		l.got = append(l.got, string(p))
		l.mu.Unlock()
	}
	if l.out.replies != nil {
		for _, d := range l.out.replies(p, to) {
			l.in <- d
		}
	}
	return nil
}

func (l *scriptedLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	if d := l.out.flood; d != nil {
		select {
		case <-l.done:
			return 0, netx.Addr{}, net.ErrClosed
		default:
			l.reads.Add(1)
			return copy(p, d.payload), d.from, nil
		}
	}
	select {
	case d := <-l.in:
		l.reads.Add(1)
		return copy(p, d.payload), d.from, nil
	case <-l.done:
		time.Sleep(l.out.linger)
		l.ended.Store(true)
		return 0, netx.Addr{}, net.ErrClosed
	}
}

func (l *scriptedLink) Close() error {
	l.closes.Add(1)
	l.once.Do(func() { close(l.done) })
	return nil
}

// blockingOutbound's DialPacket blocks until its context ends, as a proxy
// dial to an upstream that does not answer would.
type blockingOutbound struct {
	entered chan struct{}
	ctxErr  chan error
}

func (o *blockingOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("blockingOutbound dials no streams")
}

func (o *blockingOutbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	close(o.entered)
	<-ctx.Done()
	o.ctxErr <- ctx.Err()
	return nil, ctx.Err()
}

// payloads returns what was sent on the link, in order.
func (l *scriptedLink) payloads() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.got...)
}

// silentOutbound's DialPacket blocks until its context ends, as an open on a
// proxy server that accepts and never answers does. It counts its opens.
type silentOutbound struct {
	dials    atomic.Int32
	inFlight atomic.Int32
	ended    chan error // the context errors of ended opens, when buffered room is left
}

func newSilent() *silentOutbound { return &silentOutbound{ended: make(chan error, 8)} }

func (o *silentOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("silentOutbound dials no streams")
}

func (o *silentOutbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	o.dials.Add(1)
	o.inFlight.Add(1)
	defer o.inFlight.Add(-1)
	<-ctx.Done()
	select {
	case o.ended <- ctx.Err():
	default:
	}
	return nil, ctx.Err()
}
