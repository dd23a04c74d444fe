// Package slot keeps one lazily established, shared, reusable resource of
// a node: a QUIC connection, a WireGuard tunnel, an HTTP/2 connection that
// carries many streams. Every user of the node shares the one resource the
// slot holds; the first user that finds none establishes it, every user
// that arrives meanwhile waits for that one establishment, and a resource
// that dies is replaced by the next user.
//
// # Establishment
//
// One establishment runs at a time (single flight), on a goroutine of the
// slot's own. It runs under the deadline of the dial that started it (its
// absolute establishment deadline; Config.Timeout when that dial has none)
// and with that dial's context values, but not under its cancellation: a
// waiter whose context ends leaves alone, with its context's cause, and the
// establishment goes on for the others and for the users after them, until
// it succeeds, fails, its deadline passes or the slot is closed or drained.
// A resource whose handshake is already under way is the warm state the
// next flow wants; the deadline bounds what an abandoned one costs.
//
// The dial that starts an establishment takes its admission permit first
// (netx.Admit): establishing is a physical connect and a handshake. The
// establishment itself runs under an establishment of its own without an
// admission bound, so nothing it does takes a second permit, and nothing
// is left held when the starting dial ends before it. Users that join an
// establishment or find the resource up open logical streams: they take no
// permit.
//
// # Detached establishment
//
// A dial that may lose (a speculative one, netx.Speculative: one candidate
// of a cold URLTest UDP preparation) must leave nothing behind when it
// loses. AcquireDetached shares what is up or in flight as Acquire does;
// otherwise the dial establishes a detached resource under its own
// context, which is not published: the dial holds it alone and closes it
// by releasing it. The winner calls Adopt, which puts it in service when
// the slot is still empty, so that the next flow reuses it; otherwise it
// stays the winner's own until the winner releases it. A detached
// establishment never opens or extends the backoff: its failure is its
// dial's observed error.
//
// # Backoff
//
// After a failed establishment, and after a resource that died within
// MinHealthy (10 s) of coming up (unless the policy ignores deaths), the
// slot waits before the next attempt:
// 2, 4, 8, 16 s, then every 30 s (Base 1 s doubled per consecutive
// failure, capped at Max 30 s), counted from the failure. Acquire fails at
// once meanwhile, with Config.ErrBackoff, touching nothing. A resource that
// ran MinHealthy or longer clears the count: its replacement starts at
// once. An establishment cut short by Close or Drain counts as nothing.
//
// # Death, retirement, drain
//
// A resource tells its own death by closing its Done channel (the slot
// watches it on a goroutine of its own and checks it at each Acquire); a
// user that finds it dead reports it with Lost. Either way it is closed and
// forgotten, and the next Acquire establishes another. Retire takes a
// resource out of service without a failure (purged, going away, full): it
// keeps carrying the users that hold it and closes when the last of them
// releases it (or at once, with cut). Drain retires every resource and
// refuses new users; Close ends everything at once, users included, and
// waits for the slot's goroutines.
//
// # Observable state
//
// State reads a published snapshot (phase, generation, failures, next
// retry, last error, holds): it takes no lock a dial or a drain holds.
package slot

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// Resource is what a slot holds.
type Resource interface {
	// Done is closed once the resource ended, by itself or by Close. A
	// resource that cannot tell returns nil: its users then report its
	// death with Slot.Lost.
	Done() <-chan struct{}
	// Close ends the resource at once, with every user on it. It is
	// idempotent, and it closes Done when Done is not nil.
	Close()
}

// The slot's own errors, returned when the Config names none.
var (
	ErrBackoff  = errors.New("slot: the resource is down, waiting before the next attempt")
	ErrClosed   = errors.New("slot: closed")
	ErrTaskGone = errors.New("slot: the establishment ended without a result")
)

// Config is what a slot is built from.
type Config[T Resource] struct {
	// Establish brings a resource up under ctx, which carries the
	// establishment deadline; it ends early when ctx does.
	Establish func(ctx context.Context) (T, error)
	// Policy is the backoff; zero fields take DefaultPolicy's.
	Policy Policy
	// Now is the clock of the backoff and lifetimes (nil: time.Now). The
	// establishment deadline runs on the real clock.
	Now func() time.Time
	// Timeout bounds an establishment started by a dial without a
	// deadline (0: netx.EstablishTimeout(0)).
	Timeout time.Duration
	// Phase is the phase a dial's establishment reads while it waits for
	// the slot's; a dial whose wait ends early (its deadline, its
	// cancellation) then reads the phase the slot's establishment reached.
	Phase netx.Phase
	// ErrBackoff and ErrClosed are returned during a backoff and by a
	// closed or drained slot (nil: the package's).
	ErrBackoff, ErrClosed error
	// OnFail is told each failed establishment (not one cut short by
	// Close or Drain); OnLost each death of the resource in service,
	// unless the slot is closing. Both run on no lock; either may be nil.
	OnFail func(err error)
	OnLost func(v T)
}

// Res is one established resource, generation Gen of its slot. A user
// holds it from Acquire until Release; the value is V. A detached resource
// (AcquireDetached) has generation 0 until Adopt, called by its holder,
// gives it one.
type Res[T Resource] struct {
	V   T
	Gen uint64

	s     *Slot[T]
	upAt  time.Time
	holds atomic.Int64 // written under s.mu; read by State
	// Guarded by s.mu.
	retired  bool // out of service: closes once holds is 0
	gone     bool // closed (or being closed) and forgotten
	detached bool // established by AcquireDetached and not adopted
}

// UpSince is when the resource came up, by the slot's clock.
func (r *Res[T]) UpSince() time.Time { return r.upAt }

// Release gives back one hold Acquire took. The last hold on a retired
// resource closes it.
func (r *Res[T]) Release() {
	s := r.s
	s.mu.Lock()
	r.holds.Add(-1)
	closeNow := r.retired && r.holds.Load() <= 0 && !r.gone
	if closeNow {
		s.forget(r)
		s.publish()
	}
	s.mu.Unlock()
	if closeNow {
		r.V.Close()
	}
}

// attempt is the establishment in flight; its waiters read res and err
// once done is closed.
type attempt[T Resource] struct {
	done   chan struct{}
	est    *netx.Establishment // the establishment's own: its phase
	cancel context.CancelCauseFunc
	res    *Res[T]
	err    error
}

// Slot holds one resource of type T. The zero value is not usable: see New.
type Slot[T Resource] struct {
	cfg    Config[T]
	policy Policy
	now    func() time.Time
	wg     sync.WaitGroup // the establishment and the watchers

	mu       sync.Mutex // guards what follows; never held across I/O or Close
	cur      *Res[T]    // in service
	pending  *attempt[T]
	live     map[*Res[T]]struct{} // every resource not yet closed, cur included
	gen      uint64
	failures int
	retryAt  time.Time
	lastErr  error
	lastAt   time.Time
	closed   bool // Close: everything ends
	draining bool // Drain: no new user
	// detaching are the detached establishments in flight
	// (AcquireDetached), cancelled by Drain and Close.
	detaching map[*detachedAttempt]struct{}

	snap atomic.Pointer[snapshot[T]]
}

// New returns an empty slot; nothing is established before the first
// Acquire.
func New[T Resource](cfg Config[T]) *Slot[T] {
	s := &Slot[T]{cfg: cfg, policy: cfg.Policy.withDefaults(), now: cfg.Now, live: make(map[*Res[T]]struct{}), detaching: make(map[*detachedAttempt]struct{})}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cfg.Timeout <= 0 {
		s.cfg.Timeout = netx.EstablishTimeout(0)
	}
	if s.cfg.ErrBackoff == nil {
		s.cfg.ErrBackoff = ErrBackoff
	}
	if s.cfg.ErrClosed == nil {
		s.cfg.ErrClosed = ErrClosed
	}
	s.publish()
	return s
}

// Acquire returns the resource in service with a hold on it for the
// caller, establishing one when there is none. During a backoff it fails at
// once with ErrBackoff; after Drain or Close, with ErrClosed. A ctx that
// ends while the caller waits ends the wait, not the establishment.
func (s *Slot[T]) Acquire(ctx context.Context) (*Res[T], error) {
	return s.acquire(ctx, false)
}

// acquire is Acquire; detached is AcquireDetached's mode.
func (s *Slot[T]) acquire(ctx context.Context, detached bool) (*Res[T], error) {
	admitted := false
	for {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		s.mu.Lock()
		if s.closed || s.draining {
			s.mu.Unlock()
			return nil, s.cfg.ErrClosed
		}
		if r := s.cur; r != nil {
			if !isDone(r.V.Done()) {
				r.holds.Add(1)
				s.mu.Unlock()
				return r, nil
			}
			lost := s.lostLocked(r)
			s.mu.Unlock()
			s.closeLost(r, lost)
			continue
		}
		a := s.pending
		if a == nil {
			if s.now().Before(s.retryAt) {
				s.mu.Unlock()
				return nil, s.cfg.ErrBackoff
			}
			if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
				// Out of time before anything started: not the server's
				// failure, and no establishment to run.
				s.mu.Unlock()
				return nil, context.DeadlineExceeded
			}
			if !admitted {
				s.mu.Unlock()
				if err := netx.Admit(ctx); err != nil {
					return nil, err
				}
				admitted = true
				continue // the state may have moved while admission waited
			}
			if detached {
				d := s.beginDetached(ctx)
				s.mu.Unlock()
				return s.establishDetached(d)
			}
			a = s.start(ctx)
		}
		s.mu.Unlock()

		netx.Mark(ctx, s.cfg.Phase)
		select {
		case <-a.done:
		case <-ctx.Done():
			// The dial ends in the phase the establishment it waited for
			// reached, which its timeout reports.
			if p := a.est.Phase(); p != netx.PhaseRouting {
				netx.Mark(ctx, p)
			}
			return nil, context.Cause(ctx)
		}
		if a.err != nil {
			return nil, a.err
		}
		s.mu.Lock()
		if r := a.res; s.cur == r && !s.closed && !s.draining {
			r.holds.Add(1)
			s.mu.Unlock()
			return r, nil
		}
		s.mu.Unlock()
		// Retired or lost before this caller took it: go round again.
	}
}

// start launches an establishment; s.mu is held.
func (s *Slot[T]) start(caller context.Context) *attempt[T] {
	d := s.cfg.Timeout
	if dl, ok := caller.Deadline(); ok {
		d = time.Until(dl)
	}
	est, ctx, stop := netx.Begin(context.WithoutCancel(caller), nil, d)
	ctx, cancel := context.WithCancelCause(ctx)
	a := &attempt[T]{done: make(chan struct{}), est: est, cancel: cancel}
	s.pending = a
	s.publish()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer stop()
		defer est.End()
		finished := false
		defer func() {
			if !finished { // Goexit in Establish
				var zero T
				s.finish(a, zero, ErrTaskGone, true)
			}
		}()
		v, err := s.cfg.Establish(ctx)
		finished = true
		cut := context.Cause(ctx) == s.cfg.ErrClosed
		cancel(nil)
		s.finish(a, v, err, !cut)
	}()
	return a
}

// sharedDial gives err, the failure of an establishment every waiter
// shares, one episode (netx.NewEpisode), so that each flow it fails reports
// the same failure: under netx.FaultSharedDial, or under the fault err
// already names. This process's own refusals and retirements stay as they
// are.
func sharedDial(err error) error {
	f, ep := netx.FaultOf(err)
	switch {
	case f == netx.FaultLocalRefusal || f == netx.FaultRetired || ep != 0:
		return err
	case f == netx.FaultNone:
		f = netx.FaultSharedDial
	}
	return netx.WithEpisode(err, f, netx.NewEpisode())
}

// finish publishes an establishment's outcome; counts tells whether a
// failure counts toward the backoff.
func (s *Slot[T]) finish(a *attempt[T], v T, err error, counts bool) {
	now := s.now()
	var discard Resource
	s.mu.Lock()
	s.pending = nil
	switch {
	case s.closed || s.draining:
		if err == nil {
			discard = v
		}
		err = s.cfg.ErrClosed
		counts = false
	case err != nil:
		if counts {
			s.failures++
			s.retryAt = now.Add(s.policy.Wait(s.failures))
			s.lastErr, s.lastAt = err, now
			if err != ErrTaskGone {
				err = sharedDial(err) // what every waiter gets
			}
		}
	default:
		s.gen++
		r := &Res[T]{V: v, Gen: s.gen, s: s, upAt: now}
		s.cur = r
		s.live[r] = struct{}{}
		a.res = r
		if done := v.Done(); done != nil {
			s.wg.Add(1)
			go s.watch(r, done)
		}
	}
	a.err = err
	s.mu.Unlock()
	if discard != nil {
		discard.Close()
	}
	if err != nil && counts && s.cfg.OnFail != nil {
		s.cfg.OnFail(err)
	}
	// Published after the hook, so that a reader that sees the outcome
	// finds it told; the waiters are released last.
	s.mu.Lock()
	s.publish()
	s.mu.Unlock()
	close(a.done)
}

// watch waits for r to end and retires it as lost.
func (s *Slot[T]) watch(r *Res[T], done <-chan struct{}) {
	defer s.wg.Done()
	<-done
	s.Lost(r)
}

// Lost reports r dead: it is closed at once, with its users, and the next
// Acquire establishes another. When r was in service its lifetime drives
// the backoff: shorter than MinHealthy counts as a failure, longer clears
// the count. Reporting a resource already gone does nothing.
func (s *Slot[T]) Lost(r *Res[T]) {
	s.mu.Lock()
	lost := s.lostLocked(r)
	s.mu.Unlock()
	s.closeLost(r, lost)
}

// lostLocked forgets r; it reports what closeLost must do: 0 nothing, 1
// close, 2 close and tell OnLost. s.mu is held.
func (s *Slot[T]) lostLocked(r *Res[T]) int {
	if r.gone {
		return 0
	}
	current := s.cur == r
	s.forget(r)
	if !current {
		s.publish()
		return 1
	}
	now := s.now()
	young := now.Sub(r.upAt) < s.policy.MinHealthy
	switch {
	case young && !s.policy.IgnoreDeaths:
		s.failures++
		s.retryAt = now.Add(s.policy.Wait(s.failures))
	case !young:
		s.failures = 0
		s.retryAt = time.Time{}
	}
	if s.closed {
		s.publish()
		return 1
	}
	return 2
}

// closeLost finishes what lostLocked began; no lock is held. A loss of
// the resource in service is told to OnLost before it is published.
func (s *Slot[T]) closeLost(r *Res[T], lost int) {
	if lost == 2 {
		if s.cfg.OnLost != nil {
			s.cfg.OnLost(r.V)
		}
		s.mu.Lock()
		s.publish()
		s.mu.Unlock()
	}
	if lost > 0 {
		r.V.Close()
	}
}

// forget drops r from the live set; s.mu is held.
func (s *Slot[T]) forget(r *Res[T]) {
	r.gone = true
	delete(s.live, r)
	if s.cur == r {
		s.cur = nil
	}
}

// Retire takes r out of service with no failure counted: the next Acquire
// establishes another at once (the backoff stays as it is). With cut, r
// is closed now with its users; otherwise it goes on carrying the users
// that hold it and closes when the last releases it, at once when none
// does.
func (s *Slot[T]) Retire(r *Res[T], cut bool) {
	s.mu.Lock()
	if r.gone {
		s.mu.Unlock()
		return
	}
	if s.cur == r {
		s.cur = nil
	}
	r.retired = true
	closeNow := cut || r.holds.Load() <= 0
	if closeNow {
		s.forget(r)
	}
	s.publish()
	s.mu.Unlock()
	if closeNow {
		r.V.Close()
	}
}

// Purge retires the resource in service, if any (Retire without cut). An
// establishment in flight is kept: what it brings up is new already.
func (s *Slot[T]) Purge() {
	s.mu.Lock()
	r := s.cur
	s.mu.Unlock()
	if r != nil {
		s.Retire(r, false)
	}
}

// Current is the resource in service, without a hold; ok is false when
// there is none.
func (s *Slot[T]) Current() (r *Res[T], ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.cur != nil
}

// Drain refuses every later Acquire and retires every resource: each one
// closes when the last user holding it releases it. An establishment in
// flight is cancelled; its waiters get ErrClosed. Close still has to be
// called to wait for the slot's goroutines.
func (s *Slot[T]) Drain() {
	s.mu.Lock()
	if s.closed || s.draining {
		s.mu.Unlock()
		return
	}
	s.draining = true
	var idle []*Res[T]
	for r := range s.live {
		r.retired = true
		if r.holds.Load() <= 0 {
			s.forget(r)
			idle = append(idle, r)
		}
	}
	s.cur = nil
	a := s.pending
	s.publish()
	s.mu.Unlock()
	if a != nil {
		a.cancel(s.cfg.ErrClosed)
	}
	s.cancelDetached()
	for _, r := range idle {
		r.V.Close()
	}
}

// Close ends the slot: an establishment in flight is cancelled, every
// resource is closed with its users, later Acquires fail, and Close waits
// for the slot's goroutines. It is idempotent.
func (s *Slot[T]) Close() {
	s.mu.Lock()
	s.closed = true
	all := make([]*Res[T], 0, len(s.live))
	for r := range s.live {
		s.forget(r)
		all = append(all, r)
	}
	a := s.pending
	s.publish()
	s.mu.Unlock()
	if a != nil {
		a.cancel(s.cfg.ErrClosed)
	}
	s.cancelDetached()
	for _, r := range all {
		r.V.Close()
	}
	s.wg.Wait()
}

func isDone(c <-chan struct{}) bool {
	if c == nil {
		return false
	}
	select {
	case <-c:
		return true
	default:
		return false
	}
}
