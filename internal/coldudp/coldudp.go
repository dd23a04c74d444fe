// Package coldudp is the scheduler of the cold URLTest UDP preparation: when
// a top-level URLTest group has no measurement to rank its members by for a
// UDP flow, several candidates' packet transports are prepared concurrently
// and the first that succeeds, and is still eligible, carries the flow.
//
// Candidate i starts at an absolute offset from the preparation's start
// (Offset): 0, 30 and 80 ms, then one every 80 ms (160, 240, …). At most
// MaxInFlight (3) preparations run at once; a start that is due while three
// run waits for one to end, and its delay does not shift the later offsets,
// which stay measured from the start. Candidates start in the caller's
// order (the group's ranking, which without measurements is its declaration
// order).
//
// The first successful candidate that is still eligible wins. Once it has,
// every other preparation started is aborted (its context cancelled) and
// drained (Prepare waits for it to return, and discards what it prepared)
// before Prepare returns; the winner's eligibility is then checked again,
// and an ineligible winner is discarded as neutral while preparation goes
// on with the candidates not started yet.
//
// Only an observed preparation error counts against a node's health
// (Failed): an attempt that returned an error before anything cancelled it,
// including one found while draining. Never-started candidates, cancelled
// attempts, ineligible successes and drained losers are neutral.
//
// One absolute deadline (the establishment deadline, max(10 s, 4 ×
// connect_timeout)) covers the whole preparation: resolution, admission,
// negotiation, the stagger and full-capacity waits of every attempt, and
// the winner's commit. Once it has passed no candidate starts, every
// attempt is aborted and drained, and Prepare fails with an error that
// matches context.DeadlineExceeded and names the deadline.
//
// Every timer goes through a Clock, so tests drive the schedule with a fake
// one (healthtest.Clock fits).
package coldudp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// The schedule of the starts.
const (
	// MaxInFlight is how many preparations run at once.
	MaxInFlight = 3
	// SecondStart is the offset of the second candidate's start.
	SecondStart = 30 * time.Millisecond
	// Step is the offset of the third candidate's start, and the interval
	// between the starts that follow it.
	Step = 80 * time.Millisecond
)

// Offset is the absolute start offset of candidate i (from 0), from the
// start of the preparation.
func Offset(i int) time.Duration {
	switch {
	case i <= 0:
		return 0
	case i == 1:
		return SecondStart
	}
	return time.Duration(i-1) * Step
}

// Clock is the scheduler's source of time, the shape of health.Clock.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has elapsed; stop cancels the call.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Options describe one preparation over candidates 0 … Candidates-1.
type Options[T any] struct {
	Candidates int
	// Start prepares candidate i under ctx, which is cancelled when the
	// candidate lost, the deadline passed or the caller's context ended.
	// It runs on a goroutine of its own and must return once ctx is done.
	Start func(ctx context.Context, i int) (T, error)
	// Eligible reports whether candidate i may still carry the flow; it is
	// asked of each success and again of the winner once the losers are
	// drained. nil: always.
	Eligible func(i int) bool
	// Discard releases what candidate i prepared and will not carry the
	// flow: a loser, an ineligible success. nil: nothing to release.
	Discard func(i int, v T)
	// Failed hears each observed preparation error (see the package
	// documentation), on the caller's goroutine, before Prepare returns.
	Failed func(i int, err error)
	// Deadline bounds the whole preparation from the call (0: the default
	// establishment deadline, netx.EstablishTimeout(0)).
	Deadline time.Duration
	// Clock is the source of time; nil is the wall clock.
	Clock Clock

	// returned, in tests, hears that candidate i's result was handed to
	// the scheduler.
	returned func(i int)
}

// ErrNoCandidates is the error of a preparation given no candidate.
var ErrNoCandidates = errors.New("cold UDP preparation: no candidate")

// Error is the failure of a preparation that found no winner: every
// candidate failed, or the deadline passed first. It wraps the observed
// errors (and the deadline's, which matches context.DeadlineExceeded).
type Error struct {
	Candidates, Started int
	// Deadline is the preparation's deadline; Expired is set when it
	// passed before a winner was found.
	Deadline time.Duration
	Expired  bool
	// Errs are the observed errors, in the order they were observed.
	Errs []error
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.Expired {
		fmt.Fprintf(&b, "cold UDP preparation: %s with %d of %d candidates started",
			(&netx.DeadlineError{After: e.Deadline}).Error(), e.Started, e.Candidates)
	} else if len(e.Errs) == e.Candidates {
		fmt.Fprintf(&b, "cold UDP preparation: all %d candidates failed", e.Candidates)
	} else {
		fmt.Fprintf(&b, "cold UDP preparation: none of %d candidates opened while eligible", e.Candidates)
	}
	for i, err := range e.Errs {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap is the deadline's error, when it passed, and the observed errors.
func (e *Error) Unwrap() []error {
	out := make([]error, 0, len(e.Errs)+1)
	if e.Expired {
		out = append(out, &netx.DeadlineError{After: e.Deadline})
	}
	return append(out, e.Errs...)
}

// The states of an attempt: it runs until it returns (done) or the
// scheduler aborts it; whichever comes first decides whether its error was
// observed or is the neutral end of a cancelled attempt.
const (
	running int32 = iota
	done
	aborted
)

type attempt struct {
	cancel context.CancelFunc
	state  atomic.Int32
	live   bool // started and its result not read yet (the scheduler's)
}

// result is what one attempt returned; aborted is set when the attempt
// was aborted, or the caller's context ended, before it returned.
type result[T any] struct {
	i       int
	v       T
	err     error
	aborted bool
}

// sched is one preparation's state, owned by the goroutine of Prepare.
type sched[T any] struct {
	o        Options[T]
	clock    Clock
	begun    time.Time
	caller   context.Context // the caller's: its end aborts every attempt
	ctx      context.Context // the attempts' parent
	attempts []attempt
	results  chan result[T] // buffered for every candidate: an attempt never blocks
	next     int            // the next candidate to start
	flight   int            // attempts running
	errs     []error
}

// Prepare runs the preparation and returns the winner's index and what it
// prepared. The caller owns the winner's value; every other value was
// discarded and every attempt has returned.
func Prepare[T any](ctx context.Context, o Options[T]) (int, T, error) {
	var zero T
	if o.Candidates <= 0 || o.Start == nil {
		return -1, zero, ErrNoCandidates
	}
	s := &sched[T]{o: o, clock: o.Clock, caller: ctx}
	if s.clock == nil {
		s.clock = wallClock{}
	}
	deadline := o.Deadline
	if deadline <= 0 {
		deadline = netx.EstablishTimeout(0)
	}
	s.begun = s.clock.Now()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.ctx = actx
	s.attempts = make([]attempt, o.Candidates)
	s.results = make(chan result[T], o.Candidates)

	expired := make(chan struct{})
	stopDeadline := s.clock.AfterFunc(deadline, func() { close(expired) })
	defer stopDeadline()
	wake := make(chan struct{}, 1)
	stopWake := func() bool { return false }
	defer func() { stopWake() }()

	for {
		select {
		case <-expired:
			s.drain()
			return -1, zero, &Error{Candidates: o.Candidates, Started: s.next, Deadline: deadline, Expired: true, Errs: s.errs}
		default:
		}
		// Start what is due while a slot is free, after arming the wake-up
		// of the next start: once an attempt has begun, the timer of the
		// one after it is armed.
		now := s.clock.Now()
		var due []int
		for s.next < o.Candidates && s.flight < MaxInFlight && !now.Before(s.begun.Add(Offset(s.next))) {
			due = append(due, s.next)
			s.next++
			s.flight++
		}
		stopWake()
		stopWake = func() bool { return false }
		if s.next < o.Candidates && s.flight < MaxInFlight {
			// Read the time again: the next start may have fallen due
			// meanwhile, and is then started on the next turn. A timer
			// runs d from its arming, not from the read: when the start
			// fell due in between, the turn comes now, not d late.
			signal := func() {
				select {
				case wake <- struct{}{}:
				default:
				}
			}
			due := s.begun.Add(Offset(s.next))
			if d := due.Sub(s.clock.Now()); d > 0 {
				stopWake = s.clock.AfterFunc(d, signal)
				if !s.clock.Now().Before(due) {
					signal()
				}
			} else {
				signal()
			}
		}
		for _, i := range due {
			s.launch(i)
		}
		if s.flight == 0 && s.next >= o.Candidates {
			return -1, zero, &Error{Candidates: o.Candidates, Started: s.next, Deadline: deadline, Errs: s.errs}
		}

		select {
		case r := <-s.results:
			s.flight--
			s.attempts[r.i].live = false
			if !s.settle(r) {
				continue
			}
			// A winner: the losers are aborted and drained, then its
			// eligibility is read again, and the deadline, which covers
			// its commit.
			s.drain()
			if !s.eligible(r.i) {
				s.discard(r)
				continue
			}
			select {
			case <-expired:
				s.discard(r)
				return -1, zero, &Error{Candidates: o.Candidates, Started: s.next, Deadline: deadline, Expired: true, Errs: s.errs}
			default:
			}
			return r.i, r.v, nil
		case <-wake:
		case <-expired:
			s.drain()
			return -1, zero, &Error{Candidates: o.Candidates, Started: s.next, Deadline: deadline, Expired: true, Errs: s.errs}
		case <-ctx.Done():
			s.drain()
			return -1, zero, fmt.Errorf("cold UDP preparation: %w", context.Cause(ctx))
		}
	}
}

// launch starts candidate i's attempt on a goroutine the preparation waits
// for.
func (s *sched[T]) launch(i int) {
	ctx, cancel := context.WithCancel(s.ctx)
	a := &s.attempts[i]
	a.cancel, a.live = cancel, true
	go func() {
		v, err := s.o.Start(ctx, i)
		ab := !a.state.CompareAndSwap(running, done) || s.caller.Err() != nil
		s.results <- result[T]{i: i, v: v, err: err, aborted: ab}
		if s.o.returned != nil {
			s.o.returned(i)
		}
		cancel()
	}()
}

// settle files one attempt's result and reports whether it is a winner:
// a success still eligible. An observed error is reported; a cancelled
// attempt and an ineligible success are neutral.
func (s *sched[T]) settle(r result[T]) bool {
	if r.err != nil {
		if !r.aborted {
			s.errs = append(s.errs, r.err)
			if s.o.Failed != nil {
				s.o.Failed(r.i, r.err)
			}
		}
		return false
	}
	if !s.eligible(r.i) {
		s.discard(r)
		return false
	}
	return true
}

// drain aborts every attempt running and waits for each: a success is
// discarded, an error that completed before the abort still counts.
func (s *sched[T]) drain() {
	for i := range s.attempts {
		if a := &s.attempts[i]; a.live {
			a.state.CompareAndSwap(running, aborted)
			a.cancel()
		}
	}
	for s.flight > 0 {
		r := <-s.results
		s.flight--
		s.attempts[r.i].live = false
		if r.err != nil {
			s.settle(r)
			continue
		}
		s.discard(r)
	}
}

func (s *sched[T]) eligible(i int) bool { return s.o.Eligible == nil || s.o.Eligible(i) }

func (s *sched[T]) discard(r result[T]) {
	if s.o.Discard != nil {
		s.o.Discard(r.i, r.v)
	}
}
