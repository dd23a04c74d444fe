package direct

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// The name cache of one UDP link and its bounds.
//
// A datagram to a name is never held up by DNS, nor is any other datagram of
// the link: a name that is not cached starts one lookup on a goroutine of the
// link's, shared by every datagram to that name meanwhile, and those datagrams
// wait for it in a queue of maxQueued packets (maxQueuedBytes of buffers),
// sent in order once the name resolves. Past the bound they are dropped and
// counted; so is a datagram to a new name while maxLookups are in flight.
//
// An answer is kept for its TTL when the resolver reports one
// (netx.TTLResolver), for netx.DefaultTTL otherwise, clamped to
// [minTTL, maxTTL]: minTTL keeps a zero-TTL name from costing a lookup per
// datagram, maxTTL keeps a link from sending to an address its resolver has
// long since moved away from. An expired answer is still used while its
// refresh is in flight, so a busy flow sees no gap. A failure is kept for
// negativeTTL: a client retransmitting to a name that does not resolve costs
// one lookup per 5 s, not one per datagram, and a name that starts resolving
// again (the network came back) is used within 5 s.
const (
	resolveTimeout = 5 * time.Second // one lookup
	cacheSize      = 64              // names remembered, answers and failures alike
	maxLookups     = 16              // lookups in flight at once
	maxQueued      = 16              // datagrams waiting for one name
	maxQueuedBytes = netx.MaxBuf     // buffer memory waiting for one name: 16 MTU-sized, or one of the largest
	minTTL         = 10 * time.Second
	maxTTL         = 10 * time.Minute
	negativeTTL    = 5 * time.Second
)

// resolvingUDP sends each datagram to its own destination, resolving names
// with the outbound's resolver under its address-family strategy.
type resolvingUDP struct {
	u        *netx.DualUDP
	resolver netx.Resolver
	strategy netx.Strategy
	log      *slog.Logger
	now      func() time.Time

	ctx     context.Context // bounds the lookups; cancelled by Close
	cancel  context.CancelFunc
	lookups sync.WaitGroup // one per lookup in flight

	drops atomic.Uint64 // datagrams to names dropped

	// mu guards cache, pending and closed. It is never held across a lookup
	// or a send.
	mu      sync.Mutex
	cache   map[string]cached
	pending map[string]*lookup // the lookups in flight, by name
	closed  bool
}

// cached is what a name resolved to, or, with ip invalid, that it did not.
type cached struct {
	ip      netip.Addr
	expires time.Time
}

// lookup is one lookup in flight and the datagrams waiting for it, each
// with its destination port.
type lookup struct {
	queue netx.HeldQueue[uint16]
}

func newResolvingUDP(u *netx.DualUDP, r netx.Resolver, s netx.Strategy, log *slog.Logger) *resolvingUDP {
	ctx, cancel := context.WithCancel(context.Background())
	return &resolvingUDP{
		u: u, resolver: r, strategy: s, log: log, now: time.Now,
		ctx: ctx, cancel: cancel,
		cache: make(map[string]cached), pending: make(map[string]*lookup),
	}
}

// verdict is what becomes of a datagram to a name.
type verdict uint8

const (
	sendNow        verdict = iota // to the address returned
	queuedUp                      // waiting for the name's lookup
	queueFull                     // dropped: too many wait for the name already
	tooManyLookups                // dropped: too many names are being looked up
	unresolvable                  // dropped: the name did not resolve moments ago
	linkClosed
)

// WritePacket sends p to the address, or to the first address its name
// resolves to under the strategy. It never waits for a lookup: see the name
// cache above. A datagram to a name that does not resolve is dropped
// (reported as sent) with a debug line.
func (l *resolvingUDP) WritePacket(p []byte, to netx.Addr) error {
	if to.IP.IsValid() {
		return l.u.WriteTo(p, netip.AddrPortFrom(to.IP, to.Port))
	}
	ip, v := l.resolve(p, to)
	switch v {
	case sendNow:
		return l.u.WriteTo(p, netip.AddrPortFrom(ip, to.Port))
	case queuedUp:
		return nil
	case queueFull:
		l.drop(1, "freedom: dropping a datagram to %s: %d are waiting for it to resolve", to, maxQueued)
	case tooManyLookups:
		l.drop(1, "freedom: dropping a datagram to %s: %d other names are being resolved", to, maxLookups)
	case unresolvable:
		l.drop(1, "freedom: dropping a datagram to an unresolvable %s", to)
	case linkClosed:
		return net.ErrClosed
	}
	return nil
}

// WritePackets sends ps to the address in as few system calls as the
// socket allows (netx.PacketBatchWriter); to a name, one WritePacket each.
func (l *resolvingUDP) WritePackets(ps [][]byte, to netx.Addr) (int, error) {
	if to.IP.IsValid() {
		return l.u.WriteBatchTo(ps, netip.AddrPortFrom(to.IP, to.Port))
	}
	for i, p := range ps {
		if err := l.WritePacket(p, to); err != nil {
			return i, err
		}
	}
	return len(ps), nil
}

// Dropped returns how many datagrams to names the link dropped: to a name
// that did not resolve, or past the bounds of the lookups.
func (l *resolvingUDP) Dropped() uint64 { return l.drops.Load() }

// resolve decides, in one step under mu, what becomes of p: sent to the
// cached address, dropped for a cached failure, or queued for the name's
// lookup, which it starts when none is in flight.
func (l *resolvingUDP) resolve(p []byte, to netx.Addr) (netip.Addr, verdict) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return netip.Addr{}, linkClosed
	}
	c, found := l.cache[to.Name]
	if found && now.Before(c.expires) {
		if c.ip.IsValid() {
			return c.ip, sendNow
		}
		return netip.Addr{}, unresolvable
	}
	stale := found && c.ip.IsValid()
	if lk := l.pending[to.Name]; lk != nil {
		if stale {
			return c.ip, sendNow
		}
		if !lk.enqueue(p, to.Port) {
			return netip.Addr{}, queueFull
		}
		return netip.Addr{}, queuedUp
	}
	if len(l.pending) >= maxLookups {
		if stale {
			return c.ip, sendNow
		}
		return netip.Addr{}, tooManyLookups
	}
	lk := &lookup{}
	l.pending[to.Name] = lk
	l.lookups.Add(1)
	go l.lookup(to.Name, lk)
	if stale {
		return c.ip, sendNow
	}
	lk.enqueue(p, to.Port)
	return netip.Addr{}, queuedUp
}

// lookup runs on its own goroutine, owned by the link: it resolves name,
// sends the datagrams waiting for it in order (batch by batch, so none
// overtakes an earlier one) and only then publishes the answer, or caches
// the failure and drops them.
func (l *resolvingUDP) lookup(name string, lk *lookup) {
	defer l.lookups.Done()
	ctx, cancel := context.WithTimeout(l.ctx, resolveTimeout)
	ips, ttl, err := netx.LookupIPTTL(ctx, l.resolver, name)
	cancel()
	var ip netip.Addr
	if err == nil {
		if ips = l.strategy.Order(ips); len(ips) > 0 {
			ip = ips[0].Unmap()
		} else {
			err = netx.ErrNotResolved
		}
	}
	entry := cached{ip: ip}
	if ip.IsValid() {
		entry.expires = l.now().Add(min(max(ttl, minTTL), maxTTL))
	} else {
		entry.expires = l.now().Add(negativeTTL)
		if l.ctx.Err() == nil {
			l.debug("freedom: %s did not resolve: %v", name, err)
		}
	}
	for {
		l.mu.Lock()
		q := lk.take()
		if len(q) == 0 || l.closed || !ip.IsValid() {
			if !l.closed {
				l.store(name, entry)
			}
			delete(l.pending, name)
			closed := l.closed
			l.mu.Unlock()
			for _, w := range q {
				if closed {
					l.drops.Add(1)
				} else {
					l.drop(1, "freedom: dropping a datagram to an unresolvable %s", netx.DomainAddr(name, w.Meta))
				}
				w.Release()
			}
			return
		}
		l.mu.Unlock()
		for _, w := range q {
			if err := l.u.WriteTo(w.Payload(), netip.AddrPortFrom(ip, w.Meta)); err != nil {
				l.drop(1, "freedom: dropping a datagram to %s: %v", name, err)
			}
			w.Release()
		}
	}
}

// store caches e for name. A full cache forgets what expired, or else the
// entry that expires first. Callers hold mu.
func (l *resolvingUDP) store(name string, e cached) {
	if _, ok := l.cache[name]; !ok && len(l.cache) >= cacheSize {
		now := l.now()
		victim, first := "", time.Time{}
		for k, c := range l.cache {
			if !now.Before(c.expires) {
				delete(l.cache, k)
			} else if victim == "" || c.expires.Before(first) {
				victim, first = k, c.expires
			}
		}
		if len(l.cache) >= cacheSize {
			delete(l.cache, victim)
		}
	}
	l.cache[name] = e
}

// enqueue copies p onto the lookup's queue and reports whether it fit.
// Callers hold the link's mu.
func (lk *lookup) enqueue(p []byte, port uint16) bool {
	return lk.queue.Push(p, port, maxQueued, maxQueuedBytes)
}

// take empties the queue and returns what it held. Callers hold the link's
// mu.
func (lk *lookup) take() []netx.Held[uint16] { return lk.queue.Take() }

// drop counts n dropped datagrams and logs why at debug level.
func (l *resolvingUDP) drop(n int, format string, args ...any) {
	l.drops.Add(uint64(n))
	l.debug(format, args...)
}

// debug logs the text; it is formatted only when debug is enabled.
func (l *resolvingUDP) debug(format string, args ...any) {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		l.log.Debug(fmt.Sprintf(format, args...))
	}
}

// WaitPacket waits for the next datagram from either family's socket
// without taking it (netx.PacketWaiter).
func (l *resolvingUDP) WaitPacket() (int, error) { return l.u.WaitPacket() }

// NotifyIdle: the sockets' waits tell when they find nothing waiting
// (netx.IdleNotifier).
func (l *resolvingUDP) NotifyIdle(idle func()) bool { return l.u.NotifyIdle(idle) }

// ReadPacket returns the next datagram from either family's socket.
func (l *resolvingUDP) ReadPacket(p []byte) (int, netx.Addr, error) {
	n, from, err := l.u.ReadFrom(p)
	if err != nil {
		return 0, netx.Addr{}, err
	}
	return n, netx.AddrFromAddrPort(from), nil
}

// Close cancels the lookups in flight, waits for them (dropping what waits
// for them) and closes the sockets. It is idempotent.
func (l *resolvingUDP) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.cancel()
	l.lookups.Wait()
	return l.u.Close()
}

// PollSources hands the sockets to a Poller (netx.PollableLink).
func (l *resolvingUDP) PollSources(closed func()) []netx.PollSource { return l.u.PollSources(closed) }
