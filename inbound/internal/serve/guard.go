package serve

import (
	"container/list"
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"switchyard/internal/ratelog"
)

// The slow-down of a source that keeps failing authentication: its first
// freeFailures failures cost nothing, then every attempt it makes waits
// firstDelay, doubled with each further failure up to maxDelay. A success,
// or quietReset without a failure, forgets the source.
const (
	freeFailures = 3
	firstDelay   = 100 * time.Millisecond
	maxDelay     = 5 * time.Second
	quietReset   = time.Minute
	// maxGuarded bounds the sources remembered; the one that failed least
	// recently is forgotten first.
	maxGuarded = 4096
)

// Guard watches an inbound's authentication: it logs failures at warn (at
// most one line per interval, with the count since the previous one) and
// slows down a source that keeps failing. Its table of sources is bounded.
type Guard struct {
	log   *slog.Logger
	warn  ratelog.Limiter
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool

	mu      sync.Mutex // guards sources and lru
	sources map[netip.Addr]*list.Element
	lru     list.List // of *guarded, most recent failure first
}

type guarded struct {
	addr     netip.Addr
	failures int
	last     time.Time
}

// NewGuard returns an empty guard logging to log.
func NewGuard(log *slog.Logger) *Guard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Guard{log: log, now: time.Now, sleep: sleepCtx, sources: make(map[netip.Addr]*list.Element)}
	g.warn.Now = func() time.Time { return g.now() }
	return g
}

// Delay is how long an attempt from src waits before it is answered.
func (g *Guard) Delay(src netip.Addr) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.sources[src]
	if !ok {
		return 0
	}
	s := e.Value.(*guarded)
	if g.now().Sub(s.last) >= quietReset {
		g.lru.Remove(e)
		delete(g.sources, src)
		return 0
	}
	return delayAfter(s.failures)
}

// delayAfter is the wait of an attempt after n failures.
func delayAfter(n int) time.Duration {
	if n < freeFailures {
		return 0
	}
	d := firstDelay
	for i := freeFailures; i < n && d < maxDelay; i++ {
		d *= 2
	}
	return min(d, maxDelay)
}

// Wait waits for src's delay, no later than until (zero: no bound), and
// reports false when ctx ended first.
func (g *Guard) Wait(ctx context.Context, src netip.Addr, until time.Time) bool {
	d := g.Delay(src)
	if !until.IsZero() {
		d = min(d, time.Until(until))
	}
	if d <= 0 {
		return ctx.Err() == nil
	}
	return g.sleep(ctx, d)
}

// Failed records a failed authentication from src as user ("" when the
// client named none) and logs it.
func (g *Guard) Failed(src netip.AddrPort, user, reason string) {
	addr := src.Addr()
	now := g.now()
	g.mu.Lock()
	e, ok := g.sources[addr]
	var s *guarded
	if ok {
		s = e.Value.(*guarded)
		if now.Sub(s.last) >= quietReset {
			s.failures = 0
		}
		g.lru.MoveToFront(e)
	} else {
		s = &guarded{addr: addr}
		g.sources[addr] = g.lru.PushFront(s)
		if g.lru.Len() > maxGuarded {
			old := g.lru.Back()
			g.lru.Remove(old)
			delete(g.sources, old.Value.(*guarded).addr)
		}
	}
	s.failures++
	s.last = now
	failures := s.failures
	g.mu.Unlock()

	g.log.Debug("authentication failed", "source", src, "user", user, "error", reason)
	if n, total, due := g.warn.Note(); due {
		g.log.Warn("authentication failed", "source", src, "user", user, "error", reason,
			"source_failures", failures, "next_delay", delayAfter(failures).String(),
			"failures", n, "failures_total", total)
	}
}

// Succeeded forgets src's failures.
func (g *Guard) Succeeded(src netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.sources[src]; ok {
		g.lru.Remove(e)
		delete(g.sources, src)
	}
}

// Len is the number of sources remembered.
func (g *Guard) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lru.Len()
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
