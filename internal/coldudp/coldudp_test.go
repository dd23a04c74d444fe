package coldudp

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/health/healthtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const ms = time.Millisecond

// outcome is how a scripted attempt ends.
type outcome struct {
	v   int
	err error
}

// rig scripts the attempts of one preparation on a fake clock: each
// attempt records its start offset, then waits for its outcome on its
// release channel (buffered: an outcome sent before the start ends it at
// once) or for its context, after which it takes a moment to wind down,
// so that a preparation returning before its losers ended shows.
type rig struct {
	t       *testing.T
	clock   *healthtest.Clock
	sched   Clock // the scheduler's clock: clock unless a test wraps it
	t0      time.Time
	n       int
	release []chan outcome
	// abortOK[i]: candidate i, aborted, still returns a prepared value (a
	// success found while draining).
	abortOK []bool
	starts  chan int
	back    chan int // candidates whose result the scheduler was handed

	mu        sync.Mutex
	at        map[int]time.Duration
	failed    []int
	discarded []int
	eligible  func(i int) bool

	ended          []atomic.Bool
	flight, maxFly atomic.Int32
}

func newRig(t *testing.T, n int) *rig {
	r := &rig{t: t, clock: healthtest.NewClock(healthtest.Epoch), n: n, starts: make(chan int, n), back: make(chan int, n), at: map[int]time.Duration{}}
	r.t0 = r.clock.Now()
	r.release = make([]chan outcome, n)
	for i := range r.release {
		r.release[i] = make(chan outcome, 1)
	}
	r.abortOK = make([]bool, n)
	r.ended = make([]atomic.Bool, n)
	return r
}

var errDown = errors.New("connection refused")

func (r *rig) start(ctx context.Context, i int) (int, error) {
	r.mu.Lock()
	r.at[i] = r.clock.Now().Sub(r.t0)
	r.mu.Unlock()
	if f := r.flight.Add(1); f > r.maxFly.Load() {
		r.maxFly.Store(f)
	}
	defer r.flight.Add(-1)
	defer r.ended[i].Store(true)
	r.starts <- i
	select {
	case o := <-r.release[i]:
		return o.v, o.err
	case <-ctx.Done():
		time.Sleep(10 * ms) // winding down takes a moment
		if r.abortOK[i] {
			return 100 + i, nil
		}
		return 0, ctx.Err()
	}
}

type prepared struct {
	i, v int
	err  error
}

// run starts the preparation on a goroutine; its result comes on the
// returned channel.
func (r *rig) run(ctx context.Context, deadline time.Duration) <-chan prepared {
	out := make(chan prepared, 1)
	o := Options[int]{
		Candidates: r.n,
		Start:      r.start,
		Eligible: func(i int) bool {
			r.mu.Lock()
			f := r.eligible
			r.mu.Unlock()
			return f == nil || f(i)
		},
		Discard: func(i, v int) {
			r.mu.Lock()
			r.discarded = append(r.discarded, i)
			r.mu.Unlock()
		},
		Failed: func(i int, err error) {
			r.mu.Lock()
			r.failed = append(r.failed, i)
			r.mu.Unlock()
		},
		Deadline: deadline,
		Clock:    r.schedClock(),
		returned: func(i int) { r.back <- i },
	}
	go func() {
		i, v, err := Prepare(ctx, o)
		out <- prepared{i, v, err}
	}()
	return out
}

func (r *rig) schedClock() Clock {
	if r.sched != nil {
		return r.sched
	}
	return r.clock
}

// waitStart waits for candidate i to start and checks its offset.
func (r *rig) waitStart(i int, at time.Duration) {
	r.t.Helper()
	select {
	case got := <-r.starts:
		if got != i {
			r.t.Fatalf("candidate %d started, want %d", got, i)
		}
	case <-time.After(5 * time.Second):
		r.t.Fatalf("candidate %d never started", i)
	}
	r.mu.Lock()
	got := r.at[i]
	r.mu.Unlock()
	if got != at {
		r.t.Fatalf("candidate %d started at %v, want %v", i, got, at)
	}
}

// waitTimers waits until the clock holds n armed timers: the deadline's,
// and the next start's when one is scheduled.
func (r *rig) waitTimers(n int) {
	r.t.Helper()
	until := time.Now().Add(5 * time.Second)
	for r.clock.Timers() != n {
		if time.Now().After(until) {
			r.t.Fatalf("%d timers armed, want %d", r.clock.Timers(), n)
		}
		time.Sleep(ms)
	}
}

// waitBack waits until the scheduler was handed the results of cands.
func (r *rig) waitBack(cands ...int) {
	r.t.Helper()
	for range cands {
		select {
		case i := <-r.back:
			if !slices.Contains(cands, i) {
				r.t.Fatalf("candidate %d returned, want one of %v", i, cands)
			}
		case <-time.After(5 * time.Second):
			r.t.Fatalf("candidates %v never returned", cands)
		}
	}
}

func (r *rig) result(out <-chan prepared) prepared {
	r.t.Helper()
	select {
	case p := <-out:
		return p
	case <-time.After(5 * time.Second):
		r.t.Fatal("the preparation never returned")
	}
	return prepared{}
}

// waitDiscarded waits until the candidates cands were discarded.
func (r *rig) waitDiscarded(cands ...int) {
	r.t.Helper()
	until := time.Now().Add(5 * time.Second)
	for {
		_, d := r.counts()
		if slices.Equal(d, cands) {
			return
		}
		if time.Now().After(until) {
			r.t.Fatalf("discarded %v, want %v", d, cands)
		}
		time.Sleep(ms)
	}
}

// allEnded checks that every candidate that started has returned.
func (r *rig) allEnded() {
	r.t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.at {
		if !r.ended[i].Load() {
			r.t.Fatalf("candidate %d still running after the preparation returned", i)
		}
	}
}

func (r *rig) counts() (failed, discarded []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.failed)), slices.Sorted(slices.Values(r.discarded))
}

func TestOffsets(t *testing.T) {
	want := []time.Duration{0, 30 * ms, 80 * ms, 160 * ms, 240 * ms, 320 * ms}
	for i, w := range want {
		if got := Offset(i); got != w {
			t.Errorf("Offset(%d) = %v, want %v", i, got, w)
		}
	}
}

// Attempts that fail at once leave every slot free: each candidate starts
// exactly at its offset, 0, 30, 80, 160 and 240 ms, and every failure is
// observed and reported.
func TestStartsAtTheAbsoluteOffsets(t *testing.T) {
	r := newRig(t, 5)
	for i := range 4 {
		r.release[i] <- outcome{err: errDown}
	}
	r.release[4] <- outcome{v: 4}
	out := r.run(context.Background(), 0)
	r.waitStart(0, 0)
	// Each failure is handed back before the clock moves on: an attempt
	// still returning when the winner's drain aborts it is neutral.
	r.waitBack(0)
	for i, step := range []time.Duration{30, 50, 80, 80} {
		r.waitTimers(2)
		r.clock.Advance(step * ms)
		r.waitStart(i+1, Offset(i+1))
		if i+1 < 4 {
			r.waitBack(i + 1)
		}
	}
	p := r.result(out)
	if p.err != nil || p.i != 4 || p.v != 4 {
		t.Fatalf("prepared %+v, want candidate 4", p)
	}
	if failed, discarded := r.counts(); !slices.Equal(failed, []int{0, 1, 2, 3}) || len(discarded) != 0 {
		t.Fatalf("failed %v, discarded %v", failed, discarded)
	}
	r.allEnded()
}

// Three attempts that hang fill every slot: the fourth, due at 160 ms,
// waits for one to end, and the fifth still starts at its own offset
// (240 ms), not 80 ms after the delayed fourth.
func TestAtMostThreeInFlightAndTheScheduleStaysAbsolute(t *testing.T) {
	r := newRig(t, 6)
	out := r.run(context.Background(), 0)
	r.waitStart(0, 0)
	r.waitTimers(2)
	r.clock.Advance(30 * ms)
	r.waitStart(1, 30*ms)
	r.waitTimers(2)
	r.clock.Advance(50 * ms)
	r.waitStart(2, 80*ms)
	// Three in flight: nothing else is scheduled, whatever the time.
	r.waitTimers(1)
	r.clock.Advance(120 * ms) // 200 ms
	r.waitTimers(1)
	if n := len(r.starts); n != 0 {
		t.Fatalf("%d more candidates started with three in flight", n)
	}
	r.release[0] <- outcome{err: errDown}
	r.waitStart(3, 200*ms) // its 160 ms passed: it starts as the slot frees
	r.waitTimers(1)
	r.clock.Advance(20 * ms) // 220 ms
	r.release[1] <- outcome{err: errDown}
	r.waitTimers(2) // the fifth is due at 240 ms
	r.clock.Advance(20 * ms)
	r.waitStart(4, 240*ms)
	r.release[4] <- outcome{v: 4}
	p := r.result(out)
	if p.err != nil || p.i != 4 {
		t.Fatalf("prepared %+v, want candidate 4", p)
	}
	if m := r.maxFly.Load(); m != MaxInFlight {
		t.Fatalf("%d attempts in flight at most, want %d", m, MaxInFlight)
	}
	if _, ok := r.at[5]; ok {
		t.Fatal("a candidate started after the winner")
	}
	failed, _ := r.counts()
	if !slices.Equal(failed, []int{0, 1}) {
		t.Fatalf("failed %v, want [0 1] (the losers aborted are neutral)", failed)
	}
	r.allEnded()
}

// On a winner every other attempt started is aborted and has ended before
// Prepare returns; an aborted one that still prepared something is
// discarded; neither counts as failed.
func TestLosersAreAbortedAndDrainedBeforeReturning(t *testing.T) {
	r := newRig(t, 4)
	r.abortOK[1] = true
	out := r.run(context.Background(), 0)
	r.waitStart(0, 0)
	r.waitTimers(2)
	r.clock.Advance(30 * ms)
	r.waitStart(1, 30*ms)
	r.waitTimers(2)
	r.clock.Advance(50 * ms)
	r.waitStart(2, 80*ms)
	r.release[2] <- outcome{v: 2}
	p := r.result(out)
	if p.err != nil || p.i != 2 || p.v != 2 {
		t.Fatalf("prepared %+v, want candidate 2", p)
	}
	r.allEnded()
	failed, discarded := r.counts()
	if len(failed) != 0 || !slices.Equal(discarded, []int{1}) {
		t.Fatalf("failed %v, discarded %v: want no failure and the aborted success discarded", failed, discarded)
	}
	if _, ok := r.at[3]; ok {
		t.Fatal("a candidate started after the winner")
	}
}

// An error an attempt returned before the abort counts, even when it is
// only read while draining; the attempt aborted is neutral.
func TestAFailedLoserCountsAndACancelledOneIsNeutral(t *testing.T) {
	r := newRig(t, 3)
	out := r.run(context.Background(), 0)
	r.waitStart(0, 0)
	r.waitTimers(2)
	r.clock.Advance(30 * ms)
	r.waitStart(1, 30*ms)
	r.waitTimers(2)
	r.clock.Advance(50 * ms)
	r.waitStart(2, 80*ms)
	// Candidate 2 wins; while the scheduler asks whether it is eligible,
	// candidate 0 fails: its result is read only by the drain.
	r.mu.Lock()
	r.eligible = func(i int) bool {
		if i == 2 {
			r.release[0] <- outcome{err: errDown}
			for j := range r.back {
				if j == 0 {
					break
				}
			}
			r.mu.Lock()
			r.eligible = nil
			r.mu.Unlock()
		}
		return true
	}
	r.mu.Unlock()
	r.release[2] <- outcome{v: 2}
	p := r.result(out)
	if p.err != nil || p.i != 2 {
		t.Fatalf("prepared %+v, want candidate 2", p)
	}
	failed, discarded := r.counts()
	if !slices.Equal(failed, []int{0}) || len(discarded) != 0 {
		t.Fatalf("failed %v, discarded %v: want candidate 0 counted, candidate 1 neutral", failed, discarded)
	}
	r.allEnded()
}

// A success that is not eligible any more is discarded and neutral; so is
// a winner found ineligible once its losers are drained, and preparation
// goes on with the candidates not started yet.
func TestAnIneligibleWinnerIsSkipped(t *testing.T) {
	r := newRig(t, 4)
	asked := map[int]int{}
	r.eligible = func(i int) bool {
		asked[i]++
		switch i {
		case 0:
			return false // ineligible as it succeeds
		case 1:
			return asked[i] == 1 // ineligible by the recheck
		}
		return true
	}
	r.release[0] <- outcome{v: 0}
	out := r.run(context.Background(), 0)
	r.waitStart(0, 0)
	r.waitTimers(2)
	r.clock.Advance(30 * ms)
	r.waitStart(1, 30*ms)
	r.release[1] <- outcome{v: 1}
	r.waitBack(0, 1)
	r.waitDiscarded(0, 1)
	r.waitTimers(2)
	r.clock.Advance(50 * ms)
	r.waitStart(2, 80*ms)
	r.release[2] <- outcome{v: 2}
	p := r.result(out)
	if p.err != nil || p.i != 2 || p.v != 2 {
		t.Fatalf("prepared %+v, want candidate 2", p)
	}
	failed, discarded := r.counts()
	if len(failed) != 0 || !slices.Equal(discarded, []int{0, 1}) {
		t.Fatalf("failed %v, discarded %v", failed, discarded)
	}
	r.allEnded()
}

// Once the deadline has passed no candidate starts; the attempts running
// are aborted (neutral) and drained, and the error names the deadline.
func TestTheDeadlineStopsNewStarts(t *testing.T) {
	r := newRig(t, 6)
	r.release[0] <- outcome{err: errDown}
	r.release[1] <- outcome{err: errDown}
	out := r.run(context.Background(), 100*ms)
	r.waitStart(0, 0)
	r.waitTimers(2)
	r.clock.Advance(30 * ms)
	r.waitStart(1, 30*ms)
	r.waitTimers(2)
	r.clock.Advance(50 * ms)
	r.waitStart(2, 80*ms)
	r.waitBack(0, 1)
	r.waitTimers(2) // a slot is free: the fourth is due at 160 ms
	r.clock.Advance(100 * ms)
	p := r.result(out)
	var e *Error
	if p.err == nil || !errors.As(p.err, &e) || !e.Expired || !errors.Is(p.err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the deadline's", p.err)
	}
	if !strings.Contains(p.err.Error(), "deadline (100ms) expired") || e.Started != 3 {
		t.Fatalf("err %q (%d started): want the deadline named and 3 started", p.err, e.Started)
	}
	if !errors.Is(p.err, errDown) {
		t.Fatalf("err %v does not carry the observed errors", p.err)
	}
	r.clock.Advance(time.Second)
	if len(r.starts) != 0 {
		t.Fatal("a candidate started after the deadline")
	}
	failed, _ := r.counts()
	if !slices.Equal(failed, []int{0, 1}) {
		t.Fatalf("failed %v, want [0 1]: the attempt aborted by the deadline is neutral", failed)
	}
	r.allEnded()
	if n := r.clock.Timers(); n != 0 {
		t.Fatalf("%d timers left armed", n)
	}
}

// When every candidate failed the error says so and carries each error.
func TestEveryCandidateFailed(t *testing.T) {
	r := newRig(t, 2)
	r.release[0] <- outcome{err: errDown}
	r.release[1] <- outcome{err: errDown}
	out := r.run(context.Background(), 0)
	r.waitStart(0, 0)
	r.waitTimers(2)
	r.clock.Advance(30 * ms)
	r.waitStart(1, 30*ms)
	p := r.result(out)
	var e *Error
	if !errors.As(p.err, &e) || e.Expired || len(e.Errs) != 2 || errors.Is(p.err, context.DeadlineExceeded) {
		t.Fatalf("err %v", p.err)
	}
	if !strings.Contains(p.err.Error(), "all 2 candidates failed") {
		t.Fatalf("err %q", p.err)
	}
}

// The caller's context ending aborts everything, neutrally.
func TestTheCallersEndIsNeutral(t *testing.T) {
	r := newRig(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	out := r.run(ctx, 0)
	r.waitStart(0, 0)
	r.waitTimers(2)
	r.clock.Advance(30 * ms)
	r.waitStart(1, 30*ms)
	cancel()
	p := r.result(out)
	if !errors.Is(p.err, context.Canceled) {
		t.Fatalf("err %v", p.err)
	}
	if failed, _ := r.counts(); len(failed) != 0 {
		t.Fatalf("failed %v after the caller left", failed)
	}
	r.allEnded()
}

func TestNoCandidate(t *testing.T) {
	if _, _, err := Prepare(context.Background(), Options[int]{}); !errors.Is(err, ErrNoCandidates) {
		t.Fatalf("err %v", err)
	}
}

// lateClock is a fake clock whose time moves on by the interval asked
// for while the scheduler arms its third timer, between its reading of
// the time and the arming, as a preempted scheduler's clock does. The
// first two are the deadline's and the wake-up of the second start; the
// third re-arms that wake-up once the first attempt failed.
type lateClock struct {
	*healthtest.Clock
	mu    sync.Mutex
	armed int
}

func (c *lateClock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	c.armed++
	late := c.armed == 3
	c.mu.Unlock()
	if late {
		c.Advance(d)
	}
	return c.Clock.AfterFunc(d, f)
}

// A start that falls due while its wake-up is being armed comes at once,
// not a whole interval after it was due.
func TestAStartDueWhileItsTimerIsArmedIsNotLate(t *testing.T) {
	r := newRig(t, 2)
	r.sched = &lateClock{Clock: r.clock}
	r.release[0] <- outcome{err: errDown}
	r.release[1] <- outcome{v: 1}
	out := r.run(context.Background(), 0)
	r.waitStart(0, 0)
	r.waitStart(1, Offset(1)) // nothing advances the clock any more
	if p := r.result(out); p.err != nil || p.i != 1 {
		t.Fatalf("prepared %+v, want candidate 1", p)
	}
	r.allEnded()
}
