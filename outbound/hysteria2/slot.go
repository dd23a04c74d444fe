package hysteria2

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"switchyard/netx"
)

// The slot's limits.
const (
	// backoffBase doubled per consecutive failure, capped at backoffMax, is
	// the wait before the next connection attempt: 2, 4, 8, 16, then 30 s.
	backoffBase = time.Second
	backoffMax  = 30 * time.Second
	// minHealthyLifetime: a connection lost sooner after coming up counts as
	// a failed attempt; one that ran longer resets the count.
	minHealthyLifetime = 10 * time.Second
)

// clock tells the slot the time. Tests inject a manual one, so backoff runs
// without sleeping.
type clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// backoff is the wait after the n-th consecutive failure (n >= 1): the base
// doubled n times, capped.
func backoff(n int) time.Duration {
	if n > 5 {
		return backoffMax
	}
	return min(backoffBase<<n, backoffMax)
}

type slotState uint8

const (
	idle slotState = iota
	connecting
	ready
)

// attempt is one connect in flight; every dial that arrives meanwhile waits
// for its outcome.
type attempt struct {
	done chan struct{} // closed once conn and err are set
	conn *conn
	err  error
}

// slot holds the outbound's one connection: idle (none yet, or the last one
// failed, died or was purged), connecting (one attempt in flight, shared by
// every dial), or ready. A connect attempt runs on a goroutine of the
// slot's own and completes even when every dial waiting on it gave up; it
// ends early only when the slot is closed.
//
// Every flow holds its connection from acquire until release: a purged
// connection drains, carrying its flows until the last one is released,
// and then closes.
type slot struct {
	connect func(ctx context.Context) (*conn, error)
	clock   clock
	log     *slog.Logger
	ctx     context.Context // the slot's lifetime, cancelled by close
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the connect goroutine and the connection watchers

	mu       sync.Mutex // guards the fields below and conn.upAt and diedAt; never held across I/O
	state    slotState
	conn     *conn    // when ready
	pending  *attempt // when connecting
	failures int      // consecutive failed attempts and short-lived connections
	retryAt  time.Time
	closed   bool
	// draining are the purged connections that still carry flows; close
	// ends them too.
	draining map[*conn]struct{}
}

func newSlot(connect func(context.Context) (*conn, error), clk clock, log *slog.Logger) *slot {
	ctx, cancel := context.WithCancel(context.Background())
	return &slot{connect: connect, clock: clk, log: log, ctx: ctx, cancel: cancel}
}

// acquire returns the live connection, bringing one up when there is none,
// with a hold on it for one flow: the caller releases it when the flow ends
// (or was never opened). During the backoff after a failure it fails at
// once. Cancelling ctx ends the wait, not the attempt.
//
// The dial that starts an attempt takes its admission permit first (a new
// connection is a physical connect and a handshake); dials that join an
// attempt or find the connection ready open logical streams and pass.
func (s *slot) acquire(ctx context.Context) (*conn, error) {
	admitted := false
	s.mu.Lock()
	for {
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		if s.state == ready {
			c := s.conn
			c.flows++
			s.mu.Unlock()
			return c, nil
		}
		if s.state == connecting {
			break
		}
		if s.clock.Now().Before(s.retryAt) {
			s.mu.Unlock()
			return nil, errBackoff
		}
		if admitted {
			s.start()
			break
		}
		s.mu.Unlock()
		if err := netx.Admit(ctx); err != nil {
			return nil, err
		}
		admitted = true
		s.mu.Lock()
	}
	a := s.pending
	s.mu.Unlock()
	netx.Mark(ctx, netx.PhaseQUIC)
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	if a.err != nil {
		return nil, a.err
	}
	s.mu.Lock()
	if s.state == ready && s.conn == a.conn {
		a.conn.flows++
		s.mu.Unlock()
		return a.conn, nil
	}
	s.mu.Unlock()
	// The new connection was purged or lost before this dial took it: the
	// next one is brought up as for any dial.
	return s.acquire(ctx)
}

// release gives back a hold acquire took on c. The last flow out of a
// purged connection closes it.
func (s *slot) release(c *conn) {
	s.mu.Lock()
	c.flows--
	last := c.flows == 0 && c.draining
	if last {
		delete(s.draining, c)
	}
	s.mu.Unlock()
	if last {
		c.close()
	}
}

// purge lets the connection go: the next dial brings a new one up, at once
// (a purge is no failure: the backoff is untouched). The old connection
// keeps carrying the flows open on it and closes once the last of them
// ends, at once when none is open. An attempt in flight is kept: the
// connection it brings up is a new one already.
func (s *slot) purge() {
	s.mu.Lock()
	c := s.conn
	if s.state != ready || c == nil {
		s.mu.Unlock()
		return
	}
	s.state, s.conn = idle, nil
	c.draining = true
	idle := c.flows == 0
	if !idle {
		if s.draining == nil {
			s.draining = make(map[*conn]struct{})
		}
		s.draining[c] = struct{}{}
	}
	s.mu.Unlock()
	if idle {
		c.close()
	}
}

// current is the ready connection, nil when there is none.
func (s *slot) current() *conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != ready {
		return nil
	}
	return s.conn
}

// start launches a connect attempt. s.mu is held.
func (s *slot) start() {
	a := &attempt{done: make(chan struct{})}
	s.state, s.pending = connecting, a
	s.wg.Add(1)
	go s.run(a)
}

func (s *slot) run(a *attempt) {
	defer s.wg.Done()
	published := false
	defer func() {
		if !published {
			s.finish(a, nil, errTaskGone)
		}
	}()
	c, err := s.connect(s.ctx)
	published = true
	s.finish(a, c, err)
}

// finish publishes an attempt's outcome to the slot and to its waiters.
func (s *slot) finish(a *attempt, c *conn, err error) {
	now := s.clock.Now()
	s.mu.Lock()
	closed := s.closed
	var discard *conn
	if closed {
		discard, c, err = c, nil, errClosed
	}
	s.pending = nil
	switch {
	case closed:
		s.state = idle
	case err != nil:
		s.state = idle
		s.failures++
		s.retryAt = now.Add(backoff(s.failures))
		s.log.Warn(fmt.Sprintf("hysteria2: connect failed: %v", err))
	default:
		s.state, s.conn = ready, c
		c.upAt = now
		if c.sentinel != nil {
			s.wg.Add(1)
			go s.watch(c)
		}
	}
	a.conn, a.err = c, err
	close(a.done)
	s.mu.Unlock()
	if discard != nil {
		discard.close()
	}
}

// watch waits for the connection to end, seen as the end of its sentinel
// UDP session, and retires it.
func (s *slot) watch(c *conn) {
	defer s.wg.Done()
	for {
		if _, _, err := c.sentinel.Receive(); err != nil {
			break
		}
	}
	s.lost(c)
}

// lost retires c, found dead by its watcher or by a flow it failed. The
// next dial reconnects: at once when c lived long enough, after the backoff
// when it died young.
func (s *slot) lost(c *conn) {
	now := s.clock.Now()
	s.mu.Lock()
	if c.dead.CompareAndSwap(false, true) {
		c.diedAt = now
	}
	delete(s.draining, c)
	if s.state == ready && s.conn == c {
		s.state, s.conn = idle, nil
		if !s.closed {
			s.log.Warn("hysteria2: connection closed, reconnecting")
		}
		if c.diedAt.Sub(c.upAt) < minHealthyLifetime {
			s.failures++
			s.retryAt = c.diedAt.Add(backoff(s.failures))
		} else {
			s.failures = 0
			s.retryAt = time.Time{}
		}
	}
	s.mu.Unlock()
	c.close()
}

// close ends the slot: a connect in flight is abandoned (its socket is
// closed), the connection and every purged one still draining are closed
// with every flow on them, and close waits for the slot's goroutines. Later
// dials fail.
func (s *slot) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	c := s.conn
	s.state, s.conn = idle, nil
	draining := s.draining
	s.draining = nil
	s.mu.Unlock()
	s.cancel()
	if c != nil {
		c.close()
	}
	for d := range draining {
		d.close()
	}
	s.wg.Wait()
}
