package wireguard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/waiter"

	"switchyard/netx"
)

// Bounds of a UDP link.
const (
	// maxPayloadV4 and maxPayloadV6 are the largest datagrams UDP carries
	// over each family.
	maxPayloadV4 = 65535 - 20 - 8
	maxPayloadV6 = 65535 - 8
	// resolveTimeout bounds the lookup of one datagram's destination name.
	resolveTimeout = 5 * time.Second
	// nameCacheSize bounds the names one link remembers; nameCacheTTL how
	// long.
	nameCacheSize = 64
	nameCacheTTL  = time.Minute
	// bindTries bounds the local ports a new link tries.
	bindTries = 64
)

// errFrameTooLarge is the failure to send a datagram UDP cannot carry.
var errFrameTooLarge error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("wireguard: frame larger than the client runtime's buffer")}

// packetLink is a UDP flow inside the tunnel: one endpoint of the userspace
// stack, bound to the wildcard of both families, from which each datagram
// goes to its own address. WritePacket is called from one goroutine,
// ReadPacket from another; WaitPacket by the reader only, before its
// ReadPacket; Close may come from a third.
type packetLink struct {
	c   *gonet.UDPConn // reads and writes ep
	ep  tcpip.Endpoint
	res *resolver
	log *slog.Logger
	now func() time.Time

	// WaitPacket's: an entry on ep's queue for the link's life, whose
	// channel a datagram's arrival, an error or ep's close signals.
	wq     *waiter.Queue
	entry  waiter.Entry
	notify chan struct{}
	rerr   error // an error WaitPacket saw, for the next ReadPacket
	closed chan struct{}

	// Used by WritePacket only.
	to    net.UDPAddr
	toIP  [16]byte
	names map[string]cachedName

	closeOnce sync.Once
	// tun is the tunnel the link rides; release gives back the link's hold
	// on it; commit publishes a speculative link's own tunnel (Commit).
	// Set by DialPacket; Commit's move (move) changes the endpoint, tun and
	// release under mu, which Close takes.
	mu      sync.Mutex
	tun     *tunnel
	release func()
	commit  func(ctx context.Context)
}

type cachedName struct {
	ip      netip.Addr
	expires time.Time
}

// listenPacket opens a link on the tunnel's stack, on the next free local
// port.
func listenPacket(t *tunnel, res *resolver, now func() time.Time, log *slog.Logger) (*packetLink, error) {
	u, err := listenEndpoint(t)
	if err != nil {
		return nil, err
	}
	return newPacketLink(u, res, now, log), nil
}

// listenEndpoint opens a UDP endpoint on the tunnel's stack, on the next
// free local port.
func listenEndpoint(t *tunnel) (*udpEndpoint, error) {
	var err error
	for range bindTries {
		var u *udpEndpoint
		if u, err = t.stack.listenUDP(t.linkPort()); err == nil {
			return u, nil
		}
	}
	return nil, fmt.Errorf("wireguard: no free UDP port inside the tunnel: %w", err)
}

func newPacketLink(u *udpEndpoint, res *resolver, now func() time.Time, log *slog.Logger) *packetLink {
	l := &packetLink{
		c:      u.UDPConn,
		ep:     u.EP,
		res:    res,
		log:    log,
		now:    now,
		wq:     u.WQ,
		closed: make(chan struct{}),
		names:  make(map[string]cachedName),
	}
	l.entry, l.notify = waiter.NewChannelEntry(waiter.ReadableEvents | waiter.EventHUp | waiter.EventErr)
	l.wq.EventRegister(&l.entry)
	return l
}

var (
	_ netx.PacketLink   = (*packetLink)(nil)
	_ netx.PacketWaiter = (*packetLink)(nil)
	_ netx.Committer    = (*packetLink)(nil)
)

// Commit publishes the tunnel of a link a speculative dial opened on a
// tunnel of its own (netx.Committer): it becomes the slot's when the slot
// has none up or starting; otherwise it stays this link's and stops when
// the link closes. On a link of the shared tunnel it does nothing.
func (l *packetLink) Commit(ctx context.Context) {
	select {
	case <-l.closed:
		return
	default:
	}
	if l.commit != nil {
		l.commit(ctx)
	}
}

// move puts the link on u, an endpoint of t, which release lets go, in
// place of its own endpoint: before the link's first use (Commit). It
// returns the release of the tunnel the link left; a closed link does not
// move, and then closes u and returns release itself.
func (l *packetLink) move(u *udpEndpoint, t *tunnel, release func()) func() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		u.UDPConn.Close()
		return release
	default:
	}
	l.c.Close()
	l.wq.EventUnregister(&l.entry)
	l.c, l.ep, l.wq = u.UDPConn, u.EP, u.WQ
	l.entry, l.notify = waiter.NewChannelEntry(waiter.ReadableEvents | waiter.EventHUp | waiter.EventErr)
	l.wq.EventRegister(&l.entry)
	old := l.release
	l.tun, l.release = t, release
	return old
}

// WritePacket sends p to its own destination inside the tunnel. A name is
// resolved with the destination resolver (and remembered for a minute); a
// name that leaves no usable address drops the datagram with a debug line.
// An IP of a family the link cannot use fails the send.
func (l *packetLink) WritePacket(p []byte, to netx.Addr) error {
	ip := to.IP.Unmap()
	if !ip.IsValid() {
		var err error
		if ip, err = l.lookup(to); err != nil {
			l.log.Debug(fmt.Sprintf("wireguard: dropping a datagram to %s: %v", to, err))
			return nil
		}
	} else if err := l.res.usable(to); err != nil {
		return err
	}
	limit := maxPayloadV6
	if ip.Is4() {
		limit = maxPayloadV4
	}
	if len(p) > limit {
		return errFrameTooLarge
	}
	if ip.Is4() {
		a := ip.As4()
		copy(l.toIP[:], a[:])
		l.to.IP = l.toIP[:4]
	} else {
		l.toIP = ip.As16()
		l.to.IP = l.toIP[:]
	}
	l.to.Port = int(to.Port)
	_, err := l.c.WriteTo(p, &l.to)
	return err
}

// lookup resolves a datagram's destination name, through the link's cache.
func (l *packetLink) lookup(to netx.Addr) (netip.Addr, error) {
	now := l.now()
	if c, ok := l.names[to.Name]; ok && now.Before(c.expires) {
		return c.ip, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, err := l.res.candidates(ctx, to)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(l.names) >= nameCacheSize {
		for k, c := range l.names {
			if !now.Before(c.expires) || len(l.names) >= nameCacheSize {
				delete(l.names, k)
			}
			if len(l.names) < nameCacheSize {
				break
			}
		}
	}
	ip := addrs[0].Addr()
	l.names[to.Name] = cachedName{ip: ip, expires: now.Add(nameCacheTTL)}
	return ip, nil
}

// WaitPacket blocks until a datagram can be read and returns its size,
// without taking it (netx.PacketWaiter): the next ReadPacket returns it
// whole into a buffer of that size. It peeks the endpoint's receive queue
// and, while the queue is empty, waits on the link's entry on the
// endpoint's waiter queue, registered once: a wait allocates nothing. It
// fails as ReadPacket would: net.ErrClosed once the link or its tunnel is
// closed (Close ends a blocked wait). Only the reader calls it, before its
// ReadPacket.
func (l *packetLink) WaitPacket() (int, error) {
	if l.rerr != nil {
		return 0, l.rerr
	}
	for {
		res, err := l.ep.Read(io.Discard, tcpip.ReadOptions{Peek: true})
		switch err.(type) {
		case nil:
			return res.Total, nil
		case *tcpip.ErrWouldBlock:
		case *tcpip.ErrClosedForReceive:
			return 0, net.ErrClosed
		default:
			// What gonet's read returns for it; the endpoint forgets it
			// once read, so it is kept for the next ReadPacket.
			l.rerr = &net.OpError{Op: "read", Net: "udp", Source: l.c.LocalAddr(), Err: errors.New(err.String())}
			return 0, l.rerr
		}
		select {
		case <-l.notify:
		case <-l.closed:
			return 0, net.ErrClosed
		}
	}
}

// ReadPacket returns the next datagram and the address it came from. A
// datagram longer than p is truncated, as UDP does. It fails with
// net.ErrClosed once the link or its tunnel is closed.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	if err := l.rerr; err != nil {
		l.rerr = nil
		return 0, netx.Addr{}, err
	}
	n, from, err := l.c.ReadFrom(p)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = net.ErrClosed
		}
		return 0, netx.Addr{}, err
	}
	ua, _ := from.(*net.UDPAddr)
	if ua == nil {
		return 0, netx.Addr{}, fmt.Errorf("wireguard: datagram from an unexpected address %v", from)
	}
	ip, _ := netip.AddrFromSlice(ua.IP)
	return n, netx.Addr{IP: ip.Unmap(), Port: uint16(ua.Port)}, nil
}

// Close closes the link and unblocks a pending WaitPacket or ReadPacket.
func (l *packetLink) Close() error {
	l.closeOnce.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(l.closed)
		l.c.Close()
		l.wq.EventUnregister(&l.entry)
		if l.release != nil {
			l.release()
		}
	})
	return nil
}
