package direct

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"switchyard/netx"
)

// resolveTimeout bounds the lookup of one datagram's destination name.
const resolveTimeout = 5 * time.Second

// cacheSize bounds the names one link remembers; cacheTTL how long.
const (
	cacheSize = 64
	cacheTTL  = time.Minute
)

// resolvingUDP sends each datagram to its own destination, resolving names
// with the outbound's resolver under its address-family strategy.
type resolvingUDP struct {
	u        *netx.DualUDP
	resolver netx.Resolver
	strategy netx.Strategy
	log      *slog.Logger

	mu    sync.Mutex // guards cache
	cache map[string]cached
}

type cached struct {
	ip      netip.Addr
	expires time.Time
}

func newResolvingUDP(u *netx.DualUDP, r netx.Resolver, s netx.Strategy, log *slog.Logger) *resolvingUDP {
	return &resolvingUDP{u: u, resolver: r, strategy: s, log: log, cache: make(map[string]cached)}
}

// WritePacket sends p to the address, or to the first address its name
// resolves to under the strategy. A name that does not resolve drops the
// packet (reported as sent) with a debug line.
func (l *resolvingUDP) WritePacket(p []byte, to netx.Addr) error {
	ip := to.IP
	if !ip.IsValid() {
		var ok bool
		if ip, ok = l.lookup(to); !ok {
			l.log.Debug(fmt.Sprintf("freedom: dropping a datagram to an unresolvable %s", to))
			return nil
		}
	}
	return l.u.WriteTo(p, netip.AddrPortFrom(ip, to.Port))
}

func (l *resolvingUDP) lookup(to netx.Addr) (netip.Addr, bool) {
	now := time.Now()
	l.mu.Lock()
	c, ok := l.cache[to.Name]
	l.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.ip, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
	defer cancel()
	addrs, err := netx.Resolve(ctx, to, l.strategy, l.resolver)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, false
	}
	ip := addrs[0].Addr()
	l.mu.Lock()
	if len(l.cache) >= cacheSize {
		for k, v := range l.cache {
			if now.After(v.expires) || len(l.cache) >= cacheSize {
				delete(l.cache, k)
			}
			if len(l.cache) < cacheSize {
				break
			}
		}
	}
	l.cache[to.Name] = cached{ip: ip, expires: now.Add(cacheTTL)}
	l.mu.Unlock()
	return ip, true
}

// ReadPacket returns the next datagram from either family's socket.
func (l *resolvingUDP) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.u.ReadFrom(p)
	if err != nil {
		return 0, netx.Addr{}, err
	}
	return n, netx.AddrFromAddrPort(from), nil
}

func (l *resolvingUDP) Close() error { return l.u.Close() }
