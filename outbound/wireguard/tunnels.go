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

	"switchyard/internal/slot"
	"switchyard/netx"
)

// silenceLimit: a purged tunnel whose peer has answered no handshake for
// this long is closed and rebuilt. It is WireGuard's Reject-After-Time:
// past it no session key of the tunnel is valid, so nothing can pass
// through it either way.
const silenceLimit = device.RejectAfterTime

var (
	// ErrTunnelDown is the failure of a dial while the slot waits before
	// the next start (slot.DefaultPolicy: 2, 4, 8, 16, then every 30 s).
	// Its fault is netx.FaultSharedDial: the tunnel every flow shares
	// could not be started.
	ErrTunnelDown error = &netx.FaultError{Kind: netx.FaultSharedDial, Err: errors.New("wireguard: tunnel is down, waiting before the next attempt")}
	// errClosed is the failure of a dial on a closed outbound.
	errClosed = fmt.Errorf("wireguard: the outbound is closed: %w", net.ErrClosed)
)

// Done is closed once the tunnel's driver stopped (slot.Resource).
func (t *tunnel) Done() <-chan struct{} { return t.dead }

// tunnels keeps the one tunnel every flow of an outbound version rides in
// a slot (internal/slot: one start at a time, the backoff after failed
// starts and short-lived tunnels, a dead tunnel rebuilt by the next dial),
// with WireGuard's purge on top: a purge keeps a tunnel whose peer still
// answers, under suspicion (see the package documentation).
type tunnels struct {
	slot *slot.Slot[*tunnel]
	log  *slog.Logger

	mu sync.Mutex // guards what follows; never held across I/O
	// suspect is the tunnel a purge found with a live session, purgedAt
	// when (wall clock): it is rebuilt once its peer has been silent for
	// silence, unless the peer answers a handshake after purgedAt first.
	suspect  *tunnel
	purgedAt time.Time
	// silence is silenceLimit; tests shorten it.
	silence time.Duration
}

func newTunnels(start func(context.Context) (*tunnel, error), now func() time.Time, connectTimeout time.Duration, log *slog.Logger) *tunnels {
	return &tunnels{
		log: log,
		slot: slot.New(slot.Config[*tunnel]{
			Establish:  start,
			Now:        now,
			Timeout:    netx.EstablishTimeout(connectTimeout),
			Phase:      netx.PhaseTunnel,
			ErrBackoff: ErrTunnelDown,
			ErrClosed:  errClosed,
			OnFail: func(err error) {
				log.Warn(fmt.Sprintf("wireguard: tunnel start failed: %v", err))
			},
			OnLost: func(*tunnel) { log.Warn("wireguard: tunnel driver stopped, rebuilding") },
		}),
	}
}

// acquire returns the live tunnel with a hold on it for one flow, starting
// one when there is none; the flow releases it when it ends. A speculative
// dial (netx.Speculative) that finds no tunnel up or starting starts a
// detached one (slot.Slot.AcquireDetached): it is the flow's alone, and
// goes with the flow's hold unless the flow commits it (adopt).
func (s *tunnels) acquire(ctx context.Context) (*slot.Res[*tunnel], error) {
	if netx.Speculative(ctx) {
		return s.take(ctx, s.slot.AcquireDetached)
	}
	return s.take(ctx, s.slot.Acquire)
}

// acquireShared is acquire of the slot's own tunnel, whatever ctx says.
func (s *tunnels) acquireShared(ctx context.Context) (*slot.Res[*tunnel], error) {
	return s.take(ctx, s.slot.Acquire)
}

// take is acquire with the slot's acquire.
func (s *tunnels) take(ctx context.Context, acquire func(context.Context) (*slot.Res[*tunnel], error)) (*slot.Res[*tunnel], error) {
	for {
		r, err := acquire(ctx)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		suspect := s.suspect == r.V
		s.mu.Unlock()
		if suspect && !s.recheck(r) {
			r.Release()
			continue
		}
		return r, nil
	}
}

// adopt makes r, a detached tunnel a speculative flow committed, the
// slot's when the slot has none (slot.Slot.Adopt); it does nothing for a
// tunnel of the slot's own. It reports whether r was adopted.
func (s *tunnels) adopt(r *slot.Res[*tunnel]) bool {
	if !s.slot.Adopt(r) {
		return false
	}
	s.log.Debug("wireguard: the speculative tunnel of the chosen candidate is now the shared one")
	return true
}

// purge acts on health's finding the node dead. A peer that answers no
// handshake any more leaves the tunnel's flows carrying nothing: such a
// tunnel is closed now with its flows, and the next dial starts a new one
// (the endpoint resolved again, a new socket). A peer that answered within
// silenceLimit still holds a session with the tunnel: its flows may work,
// so it is kept, under suspicion: a dial that finds the peer silent for
// silenceLimit since rebuilds it, and an answer after the purge clears it.
// A purge counts as no failure and leaves the backoff as it is.
func (s *tunnels) purge() {
	r, ok := s.slot.Current()
	if !ok || !r.V.alive() {
		return // none, or a dead one the next dial replaces
	}
	t := r.V
	now := time.Now()
	silent := t.silentFor(now)
	if silent >= s.silenceLimit() {
		s.drop(r, silent)
		return
	}
	s.mu.Lock()
	s.suspect, s.purgedAt = t, now
	s.mu.Unlock()
	s.log.Debug(fmt.Sprintf("wireguard: the peer answered a handshake %v ago; the tunnel is kept", silent.Round(time.Second)))
}

// recheck looks again at the suspect tunnel of r as a dial is about to use
// it: an answer since the purge clears it, a silence of silenceLimit closes
// it. It reports whether the dial may take it. No lock is held.
func (s *tunnels) recheck(r *slot.Res[*tunnel]) bool {
	t := r.V
	last := t.lastHandshake()
	silent := time.Since(later(last, t.up))
	limit := s.silenceLimit()
	s.mu.Lock()
	switch {
	case s.suspect != t:
	case last.After(s.purgedAt):
		s.suspect = nil
	case silent >= limit:
		s.mu.Unlock()
		s.drop(r, silent)
		return false
	}
	s.mu.Unlock()
	return true
}

// drop closes the tunnel of r, whose peer has been silent for silent, with
// its flows; the next dial starts another. It counts as no failure.
func (s *tunnels) drop(r *slot.Res[*tunnel], silent time.Duration) {
	s.mu.Lock()
	if s.suspect == r.V {
		s.suspect = nil
	}
	s.mu.Unlock()
	s.log.Info(fmt.Sprintf("wireguard: the peer answered no handshake for %v; tunnel closed, the next flow starts a new one", silent.Round(time.Second)))
	s.slot.Retire(r, true)
}

func (s *tunnels) silenceLimit() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silence > 0 {
		return s.silence
	}
	return silenceLimit
}

// endpoint is the peer address of the current tunnel, if there is one.
func (s *tunnels) endpoint() (netip.AddrPort, bool) {
	r, ok := s.slot.Current()
	if !ok {
		return netip.AddrPort{}, false
	}
	return r.V.bind.endpoint, true
}

// Close stops the tunnel, if any, with every flow on it, and refuses every
// later dial; a start in progress is abandoned. It waits for the slot's
// goroutines.
func (s *tunnels) Close() error {
	s.slot.Close()
	return nil
}
