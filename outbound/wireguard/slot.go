package wireguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"
)

// The rebuild schedule of a tunnel.
const (
	// rebuildBackoffBase doubled per consecutive failure, capped at
	// rebuildBackoffMax, is the wait before the next start: 2, 4, 8, 16,
	// then 30 s.
	rebuildBackoffBase = time.Second
	rebuildBackoffMax  = 30 * time.Second
	// minHealthyLifetime: a tunnel that dies sooner counts as a failed
	// start; one that ran longer resets the count and is rebuilt at once.
	minHealthyLifetime = 10 * time.Second
)

var (
	// ErrTunnelDown is the failure of a dial while the slot waits before
	// the next start.
	ErrTunnelDown = errors.New("wireguard: tunnel is down, waiting before the next attempt")
	// errClosed is the failure of a dial on a closed outbound.
	errClosed = fmt.Errorf("wireguard: the outbound is closed: %w", net.ErrClosed)
)

// slot keeps the one tunnel every flow of an outbound version rides, and
// brings it back after it dies. No lock is held while a tunnel starts or
// closes: a dial that finds a start in progress waits for its outcome.
type slot struct {
	start func(context.Context) (*tunnel, error)
	now   func() time.Time
	log   *slog.Logger

	mu       sync.Mutex // guards the fields below
	tun      *tunnel    // nil until started, and after it was found dead
	starting chan struct{}
	failures int       // consecutive failed starts and short-lived tunnels
	retryAt  time.Time // no start before this
	closed   bool
}

// backoff is the wait after n consecutive failures (n >= 1): the base
// doubled n times, capped: 2, 4, 8, 16, then 30 s.
func backoff(n int) time.Duration {
	d := rebuildBackoffBase
	for i := 0; i < n && d < rebuildBackoffMax; i++ {
		d *= 2
	}
	return min(d, rebuildBackoffMax)
}

// acquire returns the live tunnel, starting one when there is none.
func (s *slot) acquire(ctx context.Context) (*tunnel, error) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, errClosed
		}
		var dead *tunnel
		if t := s.tun; t != nil {
			if t.alive() {
				s.mu.Unlock()
				return t, nil
			}
			dead, s.tun = t, nil
			s.buried(t)
		}
		if wait := s.starting; wait != nil {
			s.mu.Unlock()
			s.release(dead)
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if s.now().Before(s.retryAt) {
			s.mu.Unlock()
			s.release(dead)
			return nil, ErrTunnelDown
		}
		done := make(chan struct{})
		s.starting = done
		s.mu.Unlock()
		s.release(dead)

		t, err := s.start(ctx)

		s.mu.Lock()
		s.starting = nil
		close(done)
		switch {
		case err != nil:
			failed := ctx.Err() == nil // a cancelled dial is not the tunnel's failure
			if failed {
				s.failures++
				s.retryAt = s.now().Add(backoff(s.failures))
			}
			s.mu.Unlock()
			if failed {
				s.log.Warn(fmt.Sprintf("wireguard: tunnel start failed: %v", err))
			}
			return nil, err
		case s.closed:
			s.mu.Unlock()
			t.Close()
			return nil, errClosed
		}
		s.tun = t
		s.mu.Unlock()
		return t, nil
	}
}

// buried records a dead tunnel: one that lived shorter than
// minHealthyLifetime is a failure and delays the next start, one that lived
// longer clears the count. s.mu is held.
func (s *slot) buried(t *tunnel) {
	if t.lifetime() < minHealthyLifetime {
		s.failures++
		s.retryAt = t.diedAt.Add(backoff(s.failures))
		return
	}
	s.failures = 0
	s.retryAt = time.Time{}
}

// release logs and closes a tunnel found dead, if any; no lock is held.
func (s *slot) release(dead *tunnel) {
	if dead != nil {
		s.log.Warn("wireguard: tunnel driver stopped, rebuilding")
		dead.Close()
	}
}

func closeTunnel(t *tunnel) {
	if t != nil {
		t.Close()
	}
}

// Close stops the tunnel, if any, and refuses every later dial. A start in
// progress closes its tunnel when it ends.
func (s *slot) Close() error {
	s.mu.Lock()
	s.closed = true
	t := s.tun
	s.tun = nil
	s.mu.Unlock()
	closeTunnel(t)
	return nil
}
