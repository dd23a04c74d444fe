package wireguard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/device"
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
	// silenceLimit: a purged tunnel whose peer has answered no handshake
	// for this long is closed and rebuilt. It is WireGuard's
	// Reject-After-Time: past it no session key of the tunnel is valid, so
	// nothing can pass through it either way.
	silenceLimit = device.RejectAfterTime
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
	// suspect is the tunnel a purge found with a live session, purgedAt
	// when (wall clock): it is rebuilt once its peer has been silent for
	// silence, unless the peer answers a handshake after purgedAt first.
	suspect  *tunnel
	purgedAt time.Time
	// silence is silenceLimit; tests shorten it.
	silence time.Duration
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
			if t.alive() && t == s.suspect {
				s.mu.Unlock()
				if s.recheck(t) {
					return t, nil
				}
				continue
			}
			if t.alive() {
				s.mu.Unlock()
				return t, nil
			}
			dead, s.tun, s.suspect = t, nil, nil
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

// purge acts on health's finding the node dead. A peer that answers no
// handshake any more leaves the tunnel's flows carrying nothing: such a
// tunnel is closed now with its flows, and the next dial starts a new one
// (the endpoint resolved again, a new socket). A peer that answered within
// silenceLimit still holds a session with the tunnel: its flows may work,
// so it is kept, under suspicion: a dial that finds the peer silent for
// silenceLimit since rebuilds it, and an answer after the purge clears it.
// A purge counts as no failure and leaves the backoff as it is.
func (s *slot) purge() {
	s.mu.Lock()
	t := s.tun
	s.mu.Unlock()
	if t == nil || !t.alive() {
		return // none, or a dead one the next dial replaces
	}
	now := time.Now()
	silent := t.silentFor(now)
	s.mu.Lock()
	if s.tun != t || s.closed {
		s.mu.Unlock()
		return
	}
	if silent < s.silenceLimit() {
		s.suspect, s.purgedAt = t, now
		s.mu.Unlock()
		s.log.Debug(fmt.Sprintf("wireguard: the peer answered a handshake %v ago; the tunnel is kept", silent.Round(time.Second)))
		return
	}
	s.drop(t, silent)
}

// recheck looks again at the suspect tunnel t as a dial is about to use it:
// an answer since the purge clears it, a silence of silenceLimit closes
// it. It reports whether the dial may take t. No lock is held.
func (s *slot) recheck(t *tunnel) bool {
	last := t.lastHandshake()
	silent := time.Since(later(last, t.up))
	s.mu.Lock()
	switch {
	case s.tun != t:
		s.mu.Unlock()
		return false
	case s.suspect != t:
	case last.After(s.purgedAt):
		s.suspect = nil
	case silent >= s.silenceLimit():
		s.drop(t, silent)
		return false
	}
	s.mu.Unlock()
	return true
}

// drop closes the tunnel t, whose peer has been silent for silent, with its
// flows; the next dial starts another. s.mu is held, and drop unlocks it.
func (s *slot) drop(t *tunnel, silent time.Duration) {
	s.tun, s.suspect = nil, nil
	s.mu.Unlock()
	s.log.Info(fmt.Sprintf("wireguard: the peer answered no handshake for %v; tunnel closed, the next flow starts a new one", silent.Round(time.Second)))
	t.Close()
}

func (s *slot) silenceLimit() time.Duration {
	if s.silence > 0 {
		return s.silence
	}
	return silenceLimit
}

// endpoint is the peer address of the current tunnel, if there is one.
func (s *slot) endpoint() (netip.AddrPort, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tun == nil {
		return netip.AddrPort{}, false
	}
	return s.tun.bind.endpoint, true
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
	s.tun, s.suspect = nil, nil
	s.mu.Unlock()
	closeTunnel(t)
	return nil
}
