package slot

import (
	"context"

	"switchyard/netx"
)

// detachedAttempt is one detached establishment in flight: it runs on its
// caller's goroutine under ctx, which Drain and Close cancel.
type detachedAttempt struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   context.CancelFunc // the deadline's timer
}

// AcquireDetached is Acquire for a dial that may lose, a speculative one
// (netx.Speculative): what it uses must be undone when it loses, so it
// must not publish what it brings up. A resource in service is shared as
// Acquire shares it, and so is an establishment in flight, started by a
// dial that will use what it brings up (joining it creates nothing). With
// neither, the caller establishes a resource of its own, detached: on its
// own goroutine, under ctx (its cancellation ends the establishment at
// once; with no deadline, Config.Timeout bounds it), taking its admission
// permit as Acquire does. The resource is not put in service: the Res
// returned (Detached, generation 0) is held once, by the caller, and is
// closed when that hold is released or the caller reports it Lost. Adopt
// puts it in service instead.
//
// A failed detached establishment is the caller's observed error, and
// only the caller's: it neither counts toward the backoff nor is told to
// OnFail, and it leaves the slot's state as it was. The backoff stays the
// shared establishments' own (a caller's failure that health counts
// against the node reaches the slot through health's purge). During a
// backoff AcquireDetached fails at once with ErrBackoff, as Acquire does;
// after Drain or Close, with ErrClosed, and Drain or Close cut a detached
// establishment in flight short, which then fails with ErrClosed.
func (s *Slot[T]) AcquireDetached(ctx context.Context) (*Res[T], error) {
	return s.acquire(ctx, true)
}

// beginDetached registers a detached establishment for caller; s.mu is
// held.
func (s *Slot[T]) beginDetached(caller context.Context) *detachedAttempt {
	ctx, stop := caller, context.CancelFunc(func() {})
	if _, ok := caller.Deadline(); !ok {
		d := s.cfg.Timeout
		ctx, stop = context.WithTimeoutCause(caller, d, &netx.DeadlineError{After: d})
	}
	ctx, cancel := context.WithCancelCause(ctx)
	d := &detachedAttempt{ctx: ctx, cancel: cancel, stop: stop}
	s.detaching[d] = struct{}{}
	return d
}

// establishDetached runs d; no lock is held.
func (s *Slot[T]) establishDetached(d *detachedAttempt) (*Res[T], error) {
	settled := false
	defer func() {
		if !settled { // Establish panicked or called Goexit
			s.mu.Lock()
			delete(s.detaching, d)
			s.mu.Unlock()
		}
		d.cancel(nil)
		d.stop()
	}()
	netx.Mark(d.ctx, s.cfg.Phase)
	v, err := s.cfg.Establish(d.ctx)
	cut := context.Cause(d.ctx) == s.cfg.ErrClosed
	now := s.now()
	s.mu.Lock()
	settled = true
	delete(s.detaching, d)
	closing := s.closed || s.draining
	if err == nil && !closing {
		r := &Res[T]{V: v, s: s, upAt: now, retired: true, detached: true}
		r.holds.Store(1)
		s.live[r] = struct{}{}
		s.publish()
		s.mu.Unlock()
		return r, nil
	}
	s.mu.Unlock()
	switch {
	case err == nil:
		v.Close()
		return nil, s.cfg.ErrClosed
	case cut || closing:
		return nil, s.cfg.ErrClosed
	}
	return nil, err
}

// cancelDetached cuts every detached establishment in flight short; no
// lock is held.
func (s *Slot[T]) cancelDetached() {
	s.mu.Lock()
	ds := make([]*detachedAttempt, 0, len(s.detaching))
	for d := range s.detaching {
		ds = append(ds, d)
	}
	s.mu.Unlock()
	for _, d := range ds {
		d.cancel(s.cfg.ErrClosed)
	}
}

// Adopt puts r, a detached resource (AcquireDetached), in service when the
// slot has none and none is being established: r becomes the next
// generation, shared with every later user, and the caller's hold on it
// stays a hold like Acquire's. It reports whether r was adopted. Otherwise
// (a resource in service or in flight, r dead or already released, the
// slot draining or closed) r stays detached: the caller goes on using it
// alone, and it closes when the caller releases it. Its lifetime, for the
// backoff, counts from its establishment; adopting it clears no failure
// (a resource that then runs MinHealthy does).
func (s *Slot[T]) Adopt(r *Res[T]) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.s != s || !r.detached || r.gone || s.closed || s.draining || s.cur != nil || s.pending != nil || isDone(r.V.Done()) {
		return false
	}
	r.detached, r.retired = false, false
	s.gen++
	r.Gen = s.gen
	s.cur = r
	if done := r.V.Done(); done != nil {
		s.wg.Add(1)
		go s.watch(r, done)
	}
	s.publish()
	return true
}

// Detached reports whether r is a detached resource not adopted.
func (r *Res[T]) Detached() bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.detached
}
