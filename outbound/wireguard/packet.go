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

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"

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
var errFrameTooLarge = errors.New("wireguard: frame larger than the client runtime's buffer")

// packetLink is a UDP flow inside the tunnel: one endpoint of the userspace
// stack, bound to the wildcard of both families, from which each datagram
// goes to its own address. WritePacket is called from one goroutine,
// ReadPacket from another.
type packetLink struct {
	c   *gonet.UDPConn
	res *resolver
	log *slog.Logger
	now func() time.Time

	// Used by WritePacket only.
	to    net.UDPAddr
	toIP  [16]byte
	names map[string]cachedName

	closeOnce sync.Once
}

type cachedName struct {
	ip      netip.Addr
	expires time.Time
}

// listenPacket opens a link on the tunnel's stack, on the next free local
// port.
func listenPacket(t *tunnel, res *resolver, now func() time.Time, log *slog.Logger) (*packetLink, error) {
	var err error
	for range bindTries {
		var c *gonet.UDPConn
		c, err = t.stack.listenUDP(t.linkPort())
		if err == nil {
			return &packetLink{c: c, res: res, log: log, now: now, names: make(map[string]cachedName)}, nil
		}
	}
	return nil, fmt.Errorf("wireguard: no free UDP port inside the tunnel: %w", err)
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

// ReadPacket returns the next datagram and the address it came from. A
// datagram longer than p is truncated, as UDP does. It fails with
// net.ErrClosed once the link or its tunnel is closed.
func (l *packetLink) ReadPacket(p []byte) (int, netx.Addr, error) {
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

// Close closes the link and unblocks a pending ReadPacket.
func (l *packetLink) Close() error {
	l.closeOnce.Do(func() { l.c.Close() })
	return nil
}
