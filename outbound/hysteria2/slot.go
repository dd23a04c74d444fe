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
// failed or died), connecting (one attempt in flight, shared by every dial),
// or ready. A connect attempt runs on a goroutine of the slot's own and
// completes even when every dial waiting on it gave up; it ends early only
// when the slot is closed.
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
}

func newSlot(connect func(context.Context) (*conn, error), clk clock, log *slog.Logger) *slot {
	ctx, cancel := context.WithCancel(context.Background())
	return &slot{connect: connect, clock: clk, log: log, ctx: ctx, cancel: cancel}
}

// acquire returns the live connection, bringing one up when there is none.
// During the backoff after a failure it fails at once. Cancelling ctx ends
// the wait, not the attempt.
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
		return a.conn, a.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
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
// closed), the connection is closed with every flow on it, and close waits
// for the slot's goroutines. Later dials fail.
func (s *slot) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	c := s.conn
	s.state, s.conn = idle, nil
	s.mu.Unlock()
	s.cancel()
	if c != nil {
		c.close()
	}
	s.wg.Wait()
}
