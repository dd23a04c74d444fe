// Package connpool keeps, per node, a small bounded pool of bare
// connections to the proxy server, already connected (and, where the
// transport has one, with TLS already completed), for the protocols whose
// handshake can start on any fresh connection (VLESS, Trojan, VMess,
// Shadowsocks over TCP or TLS). A flow that takes one skips the connect
// and TLS round trips; it still runs its protocol handshake, under its own
// admission permit (the dial-budget rules: a pool hit is no physical
// connect, the handshake is).
//
// # What a pooled connection is worth
//
// A server gives a connection that sent no request a bounded time before
// it closes it. Measured against the interop servers (Xray v26.3.27,
// sing-box v1.14.1; test/interop/idle_test.go: a fresh connection on
// loopback, TLS completed where configured, then nothing sent, timed from
// the end of the client's handshakes, 70 s at most):
//
//	xray  vless/trojan/vmess tcp and tls, shadowsocks tcp   closed after 60 s
//	xray  vless tcp, trojan tls, policy handshake = 4        closed after 3.97 s
//	sing-box  vless/trojan/vmess tcp and tls, shadowsocks    still open at 70 s
//
// Xray's default handshake timeout is 60 s in this release (aligned with
// nginx's client_header_timeout); V2Ray and earlier Xray releases default
// to 4 s, and many deployments still set handshake = 4, which the timer
// counts from the accept, TLS handshake included. A client cannot tell which policy a
// server runs, so a pool starts with an idle bound of DefaultIdle (3 s):
// below the smallest of these, with a second left for the flow's request
// to reach the server. A pooled connection is handed out only while
// younger than the bound; an older one is closed, never handed out; with
// Refresh it is replaced. Each pool then learns its server's bound (see
// learn.go and "Learning the bound" below), so that a kept connection is
// not redialed every 3 s against a server that would keep it a minute.
//
// Before a connection is handed out its socket is looked into (Linux: a
// non-blocking MSG_PEEK read and the TCP state, no byte taken): one the
// server closed or reset is discarded, and the flow gets a fresh
// connection instead. On other platforms nothing is pooled.
//
// # Learning the bound
//
// The reaper looks into every pooled connection at a cadence growing with
// its age (age/16, between 250 ms and 2 s). A kept pool (Refresh, with a
// level set by Fill) that has not learned its bound keeps at most one
// sentinel: the pooled connection that reached the bound, held past it and
// never handed out, while a replacement takes its place. When the sentinel
// is found closed, last seen open at age A, the bound becomes A − min(1 s,
// A/2); when it is still open at Cap (DefaultCap, 120 s), the bound
// becomes Cap − 1 s and the sentinel is closed. Cap is where learning
// further saves under one connection a minute, and where the transport's
// TCP keepalive (120 s idle) would start probing a connection no flow
// uses. A pooled connection (not the sentinel) found closed younger than
// the bound — at hand-out, by Fill or by the reaper — lowers the bound to
// its own A − min(1 s, A/2) at once (not below MinIdle, 500 ms: one early
// death may as well be a reset), drops a sentinel then out, and starts
// learning again from there: a server restart then costs one more
// sentinel, not a lowered bound for ever. A sentinel that shows a bound
// under MinIdle (a server closing an idle connection within about a
// second) leaves nothing worth keeping: the pool stops replacing (Fill
// still deposits). The reaper's replacements are paced to one per
// Config.Idle, so a learned bound never redials faster than the starting
// one. A learned bound stands for Relearn (DefaultRelearn, 30 min); then
// the next connection to reach it is a sentinel again, so a server whose
// policy changed, or a sentinel that met a restart rather than the policy,
// costs one connection per half hour at most to correct. The bound lives
// in memory with the pool: it survives Purge (a node's death does not
// change the server's policy) and a reload that keeps the outbound version
// (the pool is kept); a changed node starts again from Idle.
//
// # Bounds and ownership
//
// At most Size (DefaultSize, 2) connections wait per pool: the warm-up
// passes deposit one at a time, and a second lets a deposit land while a
// flow takes the first. The pool's one goroutine closes expired
// connections (and, with Refresh, replaces them) and looks after the
// sentinel while any is pooled; it ends when the pool is empty or closed, and Close waits for it. Purge,
// for the health engine's alive → dead callback, closes every pooled
// connection and stops the refresh until the next Fill.
package connpool

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// The pool's defaults.
const (
	// DefaultSize bounds the connections waiting in one pool.
	DefaultSize = 2
	// DefaultIdle is the age past which a pooled connection is closed
	// instead of handed out: below a 4 s handshake policy (V2Ray's and
	// older Xray's default), the smallest bound measured.
	DefaultIdle = 3 * time.Second
)

// ErrClosed is the failure of Fill on a closed pool.
var ErrClosed = errors.New("connpool: closed")

// Config is what a pool is built from.
type Config struct {
	// Dial opens a fresh connection to the server: the TCP connect and,
	// where configured, the TLS handshake. It runs under the caller's
	// context (Get, Fill) or under Timeout (a refresh).
	Dial func(ctx context.Context) (net.Conn, error)
	// Size bounds the pooled connections (0: DefaultSize).
	Size int
	// Idle is the idle bound the pool starts with, the age past which a
	// pooled connection is closed until a learned one replaces it (0:
	// DefaultIdle); also the least interval between two replacements.
	Idle time.Duration
	// Cap is the age at which a sentinel still open ends the learning
	// (0: DefaultCap).
	Cap time.Duration
	// Relearn is how long a learned bound stands before a kept pool
	// learns it again (0: DefaultRelearn).
	Relearn time.Duration
	// Refresh replaces each connection that expires, keeping the level
	// the last Fill set, until Purge or Close.
	Refresh bool
	// Timeout bounds a refresh dial (0: netx.EstablishTimeout(0)).
	Timeout time.Duration
	// Admit, when set, runs each dial the pool makes on its own (a
	// replacement) under the process's dial admission: it returns the
	// dial's context and the call that ends the admission.
	Admit func(ctx context.Context) (context.Context, func())
	// Now is the clock of the ages (nil: time.Now). The expiry timer
	// runs on the real clock.
	Now func() time.Time
}

// Stats is a reading of a pool, for the API and metrics.
type Stats struct {
	Idle      int    // connections pooled now
	Size      int    // the bound
	Hits      uint64 // Gets served from the pool
	Misses    uint64 // Gets that dialed
	Dead      uint64 // pooled connections found closed by the server
	Expired   uint64 // pooled connections closed for their age
	Deposited uint64 // connections that entered the pool

	IdleBound time.Duration // the age past which a pooled connection is not handed out
	Learning  bool          // the bound is provisional: a kept pool holds a sentinel to learn it
	Sentinel  bool          // a sentinel is held now (never handed out)
}

type entry struct {
	c     net.Conn
	at    time.Time // deposited
	alive time.Time // last seen open
	next  time.Time // the reaper's next look
}

// Pool is one node's pool. It is safe for concurrent use.
type Pool struct {
	cfg Config
	now func() time.Time

	ctx    context.Context // refresh dials; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the reaper
	wake   chan struct{}  // a deposit or a Purge: the reaper looks again

	mu       sync.Mutex // guards what follows; never held across I/O
	idle     []entry    // oldest first
	level    int        // Refresh: how many the pool keeps; 0 after Purge
	owed     int        // replacements due for connections the reaper removed
	taken    int        // Refresh: replacements due for connections flows took (unpaced)
	paced    time.Time  // the reaper's last replacement dial
	sentinel *entry     // at most one, never handed out; see learn.go
	futile   bool       // the learned bound is under the floor: no replacing
	settled  time.Time  // when the learning last ended
	epoch    uint64     // advanced by Purge: a dial begun before lands closed
	reaping  bool
	closed   bool

	nIdle                                  atomic.Int64
	bound                                  atomic.Int64 // the idle bound, ns
	learning, hasSentinel                  atomic.Bool  // written under mu
	hits, misses, dead, expired, deposited atomic.Uint64
}

// New returns an empty pool; it opens nothing.
func New(cfg Config) *Pool {
	if cfg.Size <= 0 {
		cfg.Size = DefaultSize
	}
	if cfg.Idle <= 0 {
		cfg.Idle = DefaultIdle
	}
	if cfg.Cap <= 0 {
		cfg.Cap = DefaultCap
	}
	if cfg.Relearn <= 0 {
		cfg.Relearn = DefaultRelearn
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = netx.EstablishTimeout(0)
	}
	p := &Pool{cfg: cfg, now: cfg.Now, wake: make(chan struct{}, 1)}
	if p.now == nil {
		p.now = time.Now
	}
	p.bound.Store(int64(cfg.Idle))
	p.learning.Store(true)
	p.ctx, p.cancel = context.WithCancel(context.Background())
	return p
}

// Get returns a pooled connection, fromPool true, or else a fresh one
// dialed under ctx. A pooled connection is the youngest waiting, younger
// than the idle bound, and one whose server has not closed it; the others
// met on the way are closed (one the server closed lowers the bound).
func (p *Pool) Get(ctx context.Context) (c net.Conn, fromPool bool, err error) {
	for {
		e, ok := p.take()
		if !ok {
			break
		}
		if p.now().Sub(e.at) >= p.Bound() {
			p.expired.Add(1)
		} else {
			v := look(e.c)
			if v == fine {
				p.hits.Add(1)
				p.replaceTaken()
				return e.c, true, nil
			}
			p.dead.Add(1)
			if v == closed {
				p.died(e)
			}
		}
		e.c.Close()
	}
	p.misses.Add(1)
	c, err = p.cfg.Dial(ctx)
	return c, false, err
}

// take pops the youngest pooled connection.
func (p *Pool) take() (entry, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.idle)
	if n == 0 {
		return entry{}, false
	}
	e := p.idle[n-1]
	p.idle[n-1] = entry{}
	p.idle = p.idle[:n-1]
	p.nIdle.Store(int64(len(p.idle)))
	return e, true
}

// Put deposits c, a fresh connection nothing was written to or read from:
// its age counts from now. It reports whether the pool kept it; a full or
// closed pool, or a connection that cannot be checked before use, closes
// it.
func (p *Pool) Put(c net.Conn) bool {
	return p.put(c, p.epochNow())
}

func (p *Pool) epochNow() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epoch
}

// put deposits c dialed during epoch.
func (p *Pool) put(c net.Conn, epoch uint64) bool {
	if !canProbe || !usable(c) {
		c.Close()
		return false
	}
	now := p.now()
	p.mu.Lock()
	if p.closed || epoch != p.epoch || len(p.idle) >= p.cfg.Size {
		p.mu.Unlock()
		c.Close()
		return false
	}
	p.idle = append(p.idle, entry{c: c, at: now, alive: now, next: now.Add(lookEvery(0))})
	p.nIdle.Store(int64(len(p.idle)))
	p.deposited.Add(1)
	if !p.reaping {
		p.reaping = true
		p.wg.Add(1)
		go p.reap()
	}
	p.mu.Unlock()
	p.poke()
	return true
}

// replaceTaken has a kept pool (Refresh, a level set) replace the
// connection a flow just took, at once: a second new flow right after the
// first finds one too. It is one dial per connection taken, never more
// than the level, so it is bounded by the flows themselves (each would
// have dialed anyway); the pacing of the reaper's expiry replacements does
// not apply.
func (p *Pool) replaceTaken() {
	p.mu.Lock()
	if !p.cfg.Refresh || p.level == 0 || p.closed || p.futile {
		p.mu.Unlock()
		return
	}
	p.taken++
	if !p.reaping {
		p.reaping = true
		p.wg.Add(1)
		go p.reap()
	}
	p.mu.Unlock()
	p.poke()
}

func (p *Pool) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Fill dials under ctx until n connections (at most Size) are pooled and
// reports the first dial that failed. Pooled connections the server has
// closed are discarded first: they do not count. With Refresh, n is the
// level the pool keeps from now on.
func (p *Pool) Fill(ctx context.Context, n int) error {
	n = min(n, p.cfg.Size)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	if p.cfg.Refresh {
		p.level = n
	}
	p.mu.Unlock()
	p.sweep()
	for {
		p.mu.Lock()
		missing, epoch := n-len(p.idle), p.epoch
		p.mu.Unlock()
		if missing <= 0 {
			return nil
		}
		c, err := p.cfg.Dial(ctx)
		if err != nil {
			return err
		}
		if !p.put(c, epoch) {
			return nil // full meanwhile, purged or closed
		}
	}
}

// sweep discards the pooled connections the server has closed. They are
// looked into outside the lock: meanwhile a Get misses them and dials.
func (p *Pool) sweep() {
	p.mu.Lock()
	idle, epoch := p.idle, p.epoch
	p.idle = nil
	p.mu.Unlock()
	var good, dead, gone []entry
	for _, e := range idle {
		switch look(e.c) {
		case fine:
			good = append(good, e)
		case closed:
			gone = append(gone, e)
			fallthrough
		default:
			dead = append(dead, e)
		}
	}
	var drop []entry
	p.mu.Lock()
	for _, e := range gone {
		if s := p.diedLocked(e); s != nil {
			drop = append(drop, *s)
		}
	}
	if p.closed || epoch != p.epoch {
		drop, good = append(drop, good...), nil
	}
	// What was deposited meanwhile is younger: it stays after them.
	p.idle = append(good, p.idle...)
	for len(p.idle) > p.cfg.Size {
		drop = append(drop, p.idle[0])
		p.idle = p.idle[1:]
	}
	p.nIdle.Store(int64(len(p.idle)))
	if len(p.idle) > 0 && !p.reaping {
		p.reaping = true
		p.wg.Add(1)
		go p.reap()
	}
	p.mu.Unlock()
	for _, e := range append(dead, drop...) {
		e.c.Close()
	}
	p.dead.Add(uint64(len(dead)))
	p.poke()
}

// Purge closes every pooled connection and stops the refresh until the
// next Fill; a dial under way then closes what it brings. Connections
// already handed out are the flows': untouched.
func (p *Pool) Purge() {
	p.mu.Lock()
	idle := p.idle
	if s := p.dropSentinelLocked(); s != nil {
		idle = append(idle, *s)
	}
	p.idle, p.level, p.owed, p.taken = nil, 0, 0, 0
	p.epoch++
	p.nIdle.Store(0)
	p.mu.Unlock()
	for _, e := range idle {
		e.c.Close()
	}
	p.poke()
}

// Close purges the pool, refuses every later deposit, and waits for the
// pool's goroutine. Get still dials. It is idempotent.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.cancel()
	p.Purge()
	p.wg.Wait()
}

// Stats reads the pool's counts; it takes no lock.
func (p *Pool) Stats() Stats {
	return Stats{
		Idle:      int(p.nIdle.Load()),
		Size:      p.cfg.Size,
		Hits:      p.hits.Load(),
		Misses:    p.misses.Load(),
		Dead:      p.dead.Load(),
		Expired:   p.expired.Load(),
		Deposited: p.deposited.Load(),
		IdleBound: p.Bound(),
		Learning:  p.learning.Load(),
		Sentinel:  p.hasSentinel.Load(),
	}
}

// reap closes the pooled connections as they reach the bound (one may
// become the sentinel instead), looks into them at their cadence and,
// with Refresh, dials the replacements of those it removed, paced. It runs
// while the pool holds any connection, a sentinel or a replacement due,
// and ends when there is none or the pool is closed.
func (p *Pool) reap() {
	defer p.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		p.lookDue(p.now())
		now, bound := p.now(), p.Bound()
		p.mu.Lock()
		var old []entry
		for len(p.idle) > 0 && now.Sub(p.idle[0].at) >= bound {
			e := p.idle[0]
			p.idle[0] = entry{}
			p.idle = p.idle[1:]
			p.owed++
			if !p.keepSentinelLocked(e, now) {
				old = append(old, e)
			}
		}
		p.nIdle.Store(int64(len(p.idle)))
		refill, epoch := min(p.owed+p.taken, p.level-len(p.idle)), p.epoch
		if refill <= 0 || p.futile {
			refill, p.owed, p.taken = 0, 0, 0
		}
		if p.closed || len(p.idle) == 0 && p.sentinel == nil && refill == 0 {
			p.reaping = false
			p.mu.Unlock()
			p.closeExpired(old)
			return
		}
		next, dial := p.nextLocked(now, bound, refill, p.taken > 0)
		if dial {
			if p.taken > 0 {
				p.taken--
			} else {
				p.owed--
				p.paced = now
			}
		}
		p.mu.Unlock()
		p.closeExpired(old)
		if dial {
			p.refresh(epoch)
			continue
		}
		timer.Reset(next)
		select {
		case <-timer.C:
		case <-p.wake:
			timer.Stop() // since Go 1.23 no stale tick is left to drain
		case <-p.ctx.Done():
			p.endReap()
			return
		}
	}
}

// nextLocked is how long the reaper sleeps: until the oldest pooled
// connection expires, a look is due, or a paced replacement may dial (dial
// true: now).
func (p *Pool) nextLocked(now time.Time, bound time.Duration, refill int, unpaced bool) (next time.Duration, dial bool) {
	next = time.Hour
	if len(p.idle) > 0 {
		next = min(next, p.idle[0].at.Add(bound).Sub(now))
	}
	for _, e := range p.idle {
		next = min(next, e.next.Sub(now))
	}
	if s := p.sentinel; s != nil {
		next = min(next, s.next.Sub(now))
	}
	if refill > 0 && unpaced {
		return 0, true
	}
	if refill > 0 {
		wait := p.paced.Add(p.cfg.Idle).Sub(now)
		if wait <= 0 {
			return 0, true
		}
		next = min(next, wait)
	}
	return max(next, 0), false
}

// endReap marks the reaper gone; Close has emptied the pool.
func (p *Pool) endReap() {
	p.mu.Lock()
	p.reaping = false
	p.mu.Unlock()
}

func (p *Pool) closeExpired(old []entry) {
	for _, e := range old {
		e.c.Close()
	}
	p.expired.Add(uint64(len(old)))
}

// refresh dials one replacement under Timeout and deposits it.
func (p *Pool) refresh(epoch uint64) {
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.Timeout)
	defer cancel()
	if p.cfg.Admit != nil {
		var end func()
		ctx, end = p.cfg.Admit(ctx)
		defer end()
	}
	if c, err := p.cfg.Dial(ctx); err == nil {
		p.put(c, epoch)
	}
}
