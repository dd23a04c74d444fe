package slot

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
)

func TestWaitDoublesToThirtySeconds(t *testing.T) {
	want := []time.Duration{2, 4, 8, 16, 30, 30, 30}
	for i, w := range want {
		if got := DefaultPolicy.Wait(i + 1); got != w*time.Second {
			t.Fatalf("Wait(%d) = %s, want %s", i+1, got, w*time.Second)
		}
	}
	if got := DefaultPolicy.Wait(1000); got != 30*time.Second {
		t.Fatalf("Wait(1000) = %s", got)
	}
	if got := (Policy{Base: 100 * time.Millisecond, Max: time.Second}).Wait(3); got != 800*time.Millisecond {
		t.Fatalf("a custom policy's third wait = %s", got)
	}
}

// Concurrent first users share one establishment and one resource.
func TestConcurrentAcquiresShareOneEstablishment(t *testing.T) {
	h := newHarness(t, nil)
	const n = 8
	outs := make([]chan acquired, n)
	for i := range outs {
		outs[i] = h.acquireAsync(context.Background())
	}
	c := h.est.next(t)
	waitFor(t, "establishing", func() bool { return h.s.State().Phase == Establishing })
	time.Sleep(20 * time.Millisecond) // let the others reach the slot
	h.est.succeed(c)
	for _, o := range outs {
		a := recv(t, o)
		if a.err != nil || a.r.Gen != 1 || a.r.V.id != 1 {
			t.Fatalf("acquire: %+v", a)
		}
	}
	if got := h.est.n.Load(); got != 1 {
		t.Fatalf("%d establishments for %d concurrent users", got, n)
	}
	st := h.s.State()
	if st.Phase != Up || st.Gen != 1 || st.Holds != n {
		t.Fatalf("state %+v, want up, generation 1, %d holds", st, n)
	}
	r, _ := h.s.Current()
	for range n {
		r.Release()
	}
	if st := h.s.State(); st.Holds != 0 || st.Phase != Up {
		t.Fatalf("after the releases: %+v", st)
	}
}

// A waiter whose context ends leaves alone: the establishment goes on,
// under its own context, and what it brings up serves the next user.
func TestACancelledWaiterLeavesTheEstablishmentRunning(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	first := h.acquireAsync(ctx)
	c := h.est.next(t)
	other := h.acquireAsync(context.Background())
	waitFor(t, "the second waiter", func() bool { return len(other) == 0 })
	cancel()
	if a := recv(t, first); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("the cancelled waiter: %v", a.err)
	}
	if err := c.ctx.Err(); err != nil {
		t.Fatalf("the waiter's cancellation reached the establishment: %v", err)
	}
	h.est.succeed(c)
	if a := recv(t, other); a.err != nil || a.r.Gen != 1 {
		t.Fatalf("the other waiter: %+v", a)
	}

	// With no one left waiting it still completes, and the next user finds
	// it up.
	h.s.Purge()
	ctx, cancel = context.WithCancel(context.Background())
	lone := h.acquireAsync(ctx)
	c = h.est.next(t)
	cancel()
	recv(t, lone)
	h.est.succeed(c)
	waitFor(t, "generation 2 in service", func() bool { return h.s.State().Gen == 2 })
	r, err := h.s.Acquire(context.Background())
	if err != nil || r.Gen != 2 {
		t.Fatalf("after the abandoned establishment: %v, %v", r, err)
	}
	if got := h.est.n.Load(); got != 2 {
		t.Fatalf("%d establishments, want 2", got)
	}
	if h.fails.Load() != 0 {
		t.Fatal("a cancelled waiter counted as a failure")
	}
}

// A context that ended before Acquire starts nothing and counts nothing.
func TestAnEndedContextStartsNothing(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.s.Acquire(ctx); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	if h.est.n.Load() != 0 || h.s.State().Phase != Idle {
		t.Fatalf("an ended context started an establishment: %+v", h.s.State())
	}
}

// The establishment runs under the starting dial's deadline, or under
// Config.Timeout when it has none.
func TestTheEstablishmentRunsUnderTheStartersDeadline(t *testing.T) {
	h := newHarness(t, func(c *Config[*fakeRes]) { c.Timeout = time.Hour })
	at := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), at)
	defer cancel()
	out := h.acquireAsync(ctx)
	c := h.est.next(t)
	if dl, ok := c.ctx.Deadline(); !ok || dl.Sub(at).Abs() > time.Second {
		t.Fatalf("establishment deadline %v (%v), want about %v", dl, ok, at)
	}
	h.est.succeed(c)
	r := recv(t, out).r
	h.s.Retire(r, true)

	out = h.acquireAsync(context.Background())
	c = h.est.next(t)
	if dl, ok := c.ctx.Deadline(); !ok || time.Until(dl) < 59*time.Minute {
		t.Fatalf("without a deadline the establishment got %v (%v), want Timeout", dl, ok)
	}
	h.est.succeed(c)
	recv(t, out)

	// An establishment that runs out of time is a failure.
	h.s.Purge()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	out = h.acquireAsync(ctx)
	h.est.next(t) // never answered
	recv(t, out)
	waitFor(t, "the backoff", func() bool { return h.s.State().Phase == Backoff })
	if st := h.s.State(); !errors.Is(st.LastErr, context.DeadlineExceeded) || st.Failures != 1 {
		t.Fatalf("after an establishment past its deadline: %+v", st)
	}
}

// The dial that starts an establishment takes its admission permit; the
// establishment takes none of its own, and joiners take none.
func TestOnlyTheStarterIsAdmitted(t *testing.T) {
	adm := netx.NewAdmission(netx.NewGate(1), 1)
	h := newHarness(t, nil)
	e1, ctx1, cancel1 := netx.Begin(context.Background(), adm, time.Minute)
	defer cancel1()
	out1 := h.acquireAsync(ctx1)
	c := h.est.next(t)
	if got := adm.Stats().InUse; got != 1 {
		t.Fatalf("%d permits held by the starter", got)
	}
	// Inside the establishment Admit passes at once: with the gate's one
	// permit taken, a second permit would block.
	admitted := make(chan error, 1)
	go func() { admitted <- netx.Admit(c.ctx) }()
	select {
	case err := <-admitted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Second):
		t.Fatal("the establishment waited for a second permit")
	}
	e2, ctx2, cancel2 := netx.Begin(context.Background(), adm, time.Minute)
	defer cancel2()
	out2 := h.acquireAsync(ctx2)
	time.Sleep(20 * time.Millisecond)
	h.est.succeed(c)
	if a := recv(t, out1); a.err != nil {
		t.Fatal(a.err)
	}
	if a := recv(t, out2); a.err != nil {
		t.Fatal(a.err)
	}
	e1.End()
	e2.End()
	if got := adm.Stats().InUse; got != 0 {
		t.Fatalf("%d permits left held", got)
	}
}

// Failures back off 2, 4, 8 s; Acquire fails at once meanwhile without
// starting anything; the state tells the wait and the last error.
func TestFailuresBackOff(t *testing.T) {
	errDown := errors.New("down for a while")
	h := newHarness(t, func(c *Config[*fakeRes]) { c.ErrBackoff = errDown })
	refused := errors.New("refused")
	fail := func() {
		t.Helper()
		out := h.acquireAsync(context.Background())
		h.est.next(t).fail(refused)
		if a := recv(t, out); !errors.Is(a.err, refused) {
			t.Fatalf("failed establishment: %v", a.err)
		}
	}
	backoff := func() {
		t.Helper()
		if _, err := h.s.Acquire(context.Background()); err != errDown {
			t.Fatalf("during the backoff: %v", err)
		}
	}
	fail()
	for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		st := h.s.State()
		if st.Phase != Backoff || st.Failures != i+1 || st.LastErr != refused || !st.RetryAt.Equal(h.clk.Now().Add(wait)) {
			t.Fatalf("after failure %d: %+v", i+1, st)
		}
		backoff()
		h.clk.Advance(wait - time.Millisecond)
		backoff()
		h.clk.Advance(time.Millisecond)
		if h.s.State().Phase != Idle {
			t.Fatalf("the backoff did not end after %s", wait)
		}
		fail()
	}
	if got, want := h.est.n.Load(), int32(4); got != want {
		t.Fatalf("%d establishments, want %d", got, want)
	}
	if h.fails.Load() != 4 {
		t.Fatalf("OnFail told %d times, want 4", h.fails.Load())
	}
	// A success clears nothing by itself; a healthy lifetime does.
	h.clk.Advance(16 * time.Second)
	r := h.up(t)
	h.clk.Advance(DefaultPolicy.MinHealthy)
	h.s.Lost(r)
	if st := h.s.State(); st.Failures != 0 || st.Phase != Idle {
		t.Fatalf("after a healthy resource died: %+v", st)
	}
}

// A resource that closes its Done is retired: the next user gets another,
// at once after a healthy lifetime, after the backoff after a short one.
func TestADeathIsSeenAndReplaced(t *testing.T) {
	h := newHarness(t, nil)
	r := h.up(t)
	r.Release()
	h.clk.Advance(5 * time.Second)
	r.V.Close() // dies by itself 5 s after coming up
	waitFor(t, "the death", func() bool { return h.s.State().Phase == Backoff })
	if st := h.s.State(); st.Failures != 1 || !st.RetryAt.Equal(h.clk.Now().Add(2*time.Second)) {
		t.Fatalf("after a short-lived resource: %+v", st)
	}
	if h.lost.Load() != 1 {
		t.Fatalf("OnLost told %d times", h.lost.Load())
	}
	h.clk.Advance(2 * time.Second)
	r2 := h.up(t)
	if r2.Gen != 2 {
		t.Fatalf("replacement generation %d", r2.Gen)
	}
	h.clk.Advance(15 * time.Second)
	r2.V.Close()
	// An Acquire right after the death sees it itself, watcher or not.
	out := h.acquireAsync(context.Background())
	h.est.succeed(h.est.next(t))
	if a := recv(t, out); a.err != nil || a.r.Gen != 3 {
		t.Fatalf("after a healthy resource died: %+v", a)
	}
	if st := h.s.State(); st.Failures != 0 {
		t.Fatalf("a healthy lifetime left %d failures", st.Failures)
	}
}

// With IgnoreDeaths a young death is replaced at once; only failed
// establishments back off.
func TestAPolicyThatIgnoresDeaths(t *testing.T) {
	h := newHarness(t, func(c *Config[*fakeRes]) { c.Policy.IgnoreDeaths = true })
	r := h.up(t)
	h.s.Lost(r) // at once after coming up
	if st := h.s.State(); st.Phase != Idle || st.Failures != 0 {
		t.Fatalf("after a young death: %+v", st)
	}
	out := h.acquireAsync(context.Background())
	h.est.next(t).fail(errors.New("refused"))
	recv(t, out)
	if st := h.s.State(); st.Phase != Backoff || st.Failures != 1 {
		t.Fatalf("after a failed establishment: %+v", st)
	}
}

// A resource that cannot tell its death is reported by its user.
func TestLostReportedByAUser(t *testing.T) {
	h := newHarness(t, nil)
	h.est.silent = true
	r := h.up(t)
	h.clk.Advance(time.Minute)
	h.s.Lost(r)
	if !r.V.closed.Load() {
		t.Fatal("a lost resource was not closed")
	}
	h.s.Lost(r) // again: nothing
	if h.lost.Load() != 1 {
		t.Fatalf("OnLost told %d times", h.lost.Load())
	}
	r.Release() // a hold given back after the loss is harmless
	if r2 := h.up(t); r2.Gen != 2 {
		t.Fatalf("replacement generation %d", r2.Gen)
	}
}

// Purge retires the resource without a failure: the next user gets a new
// one at once, while the old one carries its users and closes after the
// last.
func TestPurgeDrainsTheOldResource(t *testing.T) {
	h := newHarness(t, nil)
	old := h.up(t)
	h.s.Purge()
	if old.V.closed.Load() {
		t.Fatal("a purged resource with a user was closed")
	}
	if st := h.s.State(); st.Phase != Idle || st.Retired != 1 || st.Failures != 0 {
		t.Fatalf("after the purge: %+v", st)
	}
	fresh := h.up(t)
	if fresh.Gen != 2 {
		t.Fatalf("after the purge: generation %d", fresh.Gen)
	}
	old.Release()
	if !old.V.closed.Load() {
		t.Fatal("the purged resource stayed open after its last user")
	}
	if st := h.s.State(); st.Retired != 0 || h.lost.Load() != 0 {
		t.Fatalf("after the drain: %+v, %d lost", st, h.lost.Load())
	}
	// Without a user a purge closes at once; a cut closes with users.
	fresh.Release()
	h.s.Purge()
	if !fresh.V.closed.Load() {
		t.Fatal("an idle purged resource stayed open")
	}
	r := h.up(t)
	h.s.Retire(r, true)
	if !r.V.closed.Load() {
		t.Fatal("a cut resource stayed open")
	}
}

// Drain refuses new users and cancels an establishment in flight; the
// resources close as their users leave.
func TestDrain(t *testing.T) {
	h := newHarness(t, nil)
	held := h.up(t)
	h.s.Purge()
	second := h.up(t)
	second.Release()
	h.s.Purge() // second closed, held draining
	waiter := h.acquireAsync(context.Background())
	c := h.est.next(t)
	h.s.Drain()
	if a := recv(t, waiter); a.err != ErrClosed {
		t.Fatalf("a waiter on a drained slot: %v", a.err)
	}
	if !errors.Is(context.Cause(c.ctx), ErrClosed) {
		t.Fatalf("the establishment in flight was not cancelled: %v", context.Cause(c.ctx))
	}
	if _, err := h.s.Acquire(context.Background()); err != ErrClosed {
		t.Fatalf("Acquire after Drain: %v", err)
	}
	if held.V.closed.Load() {
		t.Fatal("Drain cut a user")
	}
	if st := h.s.State(); st.Phase != Draining || st.Failures != 0 || h.fails.Load() != 0 {
		t.Fatalf("after Drain: %+v", st)
	}
	held.Release()
	if !held.V.closed.Load() {
		t.Fatal("the last user's release did not close the resource")
	}
}

// Close cancels the establishment in flight, cuts every resource and
// waits for the slot's goroutines; an establishment that succeeds anyway
// is closed.
func TestClose(t *testing.T) {
	h := newHarness(t, nil)
	r := h.up(t)
	h.s.Purge()
	waiter := h.acquireAsync(context.Background())
	c := h.est.next(t)
	closed := make(chan struct{})
	go func() { h.s.Close(); close(closed) }()
	if a := recv(t, waiter); a.err != ErrClosed {
		t.Fatalf("waiter: %v", a.err)
	}
	<-closed
	if !r.V.closed.Load() {
		t.Fatal("Close left a held resource open")
	}
	if h.lost.Load() != 0 || h.fails.Load() != 0 {
		t.Fatal("Close reported a loss or a failure")
	}
	_ = c
	h.s.Close()
	if st := h.s.State(); st.Phase != Closed {
		t.Fatalf("state after Close: %v", st.Phase)
	}

	// A resource established as the slot closes is closed.
	h2 := newHarness(t, nil)
	h2.est.silent = true
	done := h2.acquireAsync(context.Background())
	c2 := h2.est.next(t)
	var once sync.Once
	late := &fakeRes{done: make(chan struct{}), silent: true}
	h2.s.mu.Lock()
	h2.s.closed = true // closed, but the establishment not yet told
	h2.s.mu.Unlock()
	once.Do(func() { c2.answer <- outcome{res: late} })
	if a := recv(t, done); a.err != ErrClosed {
		t.Fatalf("waiter: %v", a.err)
	}
	waitFor(t, "the late resource to close", late.closed.Load)
}

// An Establish that leaves its goroutine without a result releases its
// waiters with an error and counts as a failure.
func TestAnEstablishmentWithoutAResult(t *testing.T) {
	s := New(Config[*fakeRes]{Establish: func(context.Context) (*fakeRes, error) {
		runtime.Goexit()
		return nil, nil
	}})
	defer s.Close()
	if _, err := s.Acquire(context.Background()); err != ErrTaskGone {
		t.Fatalf("acquire: %v", err)
	}
	if _, err := s.Acquire(context.Background()); err != ErrBackoff {
		t.Fatalf("the vanished establishment is a failure: %v", err)
	}
}

// pastDeadline is a context whose deadline has passed while its timer has
// not fired yet.
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Now().Add(-time.Millisecond), true }

// A dial whose deadline passed before anything started starts nothing and
// counts no failure.
func TestADialPastItsDeadlineStartsNothing(t *testing.T) {
	h := newHarness(t, nil)
	if _, err := h.s.Acquire(pastDeadline{context.Background()}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("acquire: %v", err)
	}
	if st := h.s.State(); h.est.n.Load() != 0 || st.Failures != 0 || st.Phase != Idle {
		t.Fatalf("after a dial past its deadline: %+v, %d establishments", st, h.est.n.Load())
	}
}

// A waiter whose deadline passes reports the phase the establishment it
// waited for had reached.
func TestAWaiterEndsInTheEstablishmentsPhase(t *testing.T) {
	h := newHarness(t, func(c *Config[*fakeRes]) { c.Phase = netx.PhaseQUIC })
	est, ctx, cancel := netx.Begin(context.Background(), nil, time.Minute)
	defer cancel()
	wctx, wcancel := context.WithCancel(ctx)
	out := h.acquireAsync(wctx)
	c := h.est.next(t)
	waitFor(t, "the waiter's phase", func() bool { return est.Phase() == netx.PhaseQUIC })
	netx.Mark(c.ctx, netx.PhaseTLS)
	wcancel()
	recv(t, out)
	if got := est.Phase(); got != netx.PhaseTLS {
		t.Fatalf("the waiter ended in %v, want the establishment's %v", got, netx.PhaseTLS)
	}
}
