package slot

import (
	"context"
	"errors"
	"testing"
	"time"
)

type specKey struct{}

// acquireDetachedAsync runs AcquireDetached on a goroutine of the test's.
func (h *harness) acquireDetachedAsync(ctx context.Context) chan acquired {
	out := make(chan acquired, 1)
	go func() {
		r, err := h.s.AcquireDetached(ctx)
		out <- acquired{r, err}
	}()
	return out
}

// A detached establishment runs under the caller's context and publishes
// nothing: the slot stays empty, the next user establishes its own, and
// releasing the detached resource closes it.
func TestADetachedResourceIsNotPublished(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.WithValue(context.Background(), specKey{}, "spec")
	out := h.acquireDetachedAsync(ctx)
	c := h.est.next(t)
	if c.ctx.Value(specKey{}) != "spec" {
		t.Fatal("the detached establishment does not run under the caller's context")
	}
	if st := h.s.State(); st.Phase != Idle {
		t.Fatalf("a detached establishment in flight shows as %v, want idle", st.Phase)
	}
	f := h.est.succeed(c)
	a := recv(t, out)
	if a.err != nil || !a.r.Detached() || a.r.Gen != 0 || a.r.V != f {
		t.Fatalf("detached acquire: %+v", a)
	}
	if st := h.s.State(); st.Phase != Idle || st.Gen != 0 || st.Detached != 1 || st.Retired != 0 {
		t.Fatalf("state with a detached resource: %+v", st)
	}
	if _, ok := h.s.Current(); ok {
		t.Fatal("the detached resource is in service")
	}
	shared := h.acquireAsync(context.Background())
	h.est.succeed(h.est.next(t))
	s := recv(t, shared)
	if s.err != nil || s.r.V == f || s.r.Gen != 1 {
		t.Fatalf("the next user got %+v, want a resource of its own", s)
	}
	a.r.Release()
	if !f.closed.Load() {
		t.Fatal("releasing the detached resource did not close it")
	}
	if st := h.s.State(); st.Detached != 0 || st.Phase != Up || st.Gen != 1 {
		t.Fatalf("after the release: %+v", st)
	}
	s.r.Release()
}

// The caller's cancellation ends a detached establishment at once; it
// leaves no backoff and nothing behind.
func TestACancelledDetachedEstablishmentLeavesNothing(t *testing.T) {
	h := newHarness(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	out := h.acquireDetachedAsync(ctx)
	c := h.est.next(t)
	cancel()
	select {
	case <-c.ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the caller's cancellation did not reach the detached establishment")
	}
	if a := recv(t, out); !errors.Is(a.err, context.Canceled) {
		t.Fatalf("cancelled: %+v", a)
	}
	if st := h.s.State(); st.Phase != Idle || st.Failures != 0 || st.Detached != 0 || st.LastErr != nil {
		t.Fatalf("state after the cancellation: %+v", st)
	}
}

// Without a deadline of its caller's, a detached establishment runs under
// Config.Timeout.
func TestADetachedEstablishmentHasADeadline(t *testing.T) {
	h := newHarness(t, func(c *Config[*fakeRes]) { c.Timeout = time.Minute })
	out := h.acquireDetachedAsync(context.Background())
	c := h.est.next(t)
	dl, ok := c.ctx.Deadline()
	if !ok || time.Until(dl) > time.Minute || time.Until(dl) < 50*time.Second {
		t.Fatalf("detached establishment deadline %v (ok %v), want in a minute", dl, ok)
	}
	c.fail(errors.New("refused"))
	recv(t, out)
}

// A failed detached establishment is its caller's error only: no backoff,
// no OnFail, and the next user establishes at once.
func TestAFailedDetachedEstablishmentOpensNoBackoff(t *testing.T) {
	h := newHarness(t, nil)
	refused := errors.New("refused")
	out := h.acquireDetachedAsync(context.Background())
	h.est.next(t).fail(refused)
	if a := recv(t, out); !errors.Is(a.err, refused) {
		t.Fatalf("failed detached acquire: %+v", a)
	}
	if st := h.s.State(); st.Phase != Idle || st.Failures != 0 || !st.RetryAt.IsZero() || st.LastErr != nil || h.fails.Load() != 0 {
		t.Fatalf("a detached failure moved the slot: %+v, %d OnFail", st, h.fails.Load())
	}
	r := h.up(t)
	r.Release()
}

// A backoff refuses a detached establishment as it refuses a shared one.
func TestADetachedAcquireRespectsTheBackoff(t *testing.T) {
	h := newHarness(t, nil)
	out := h.acquireAsync(context.Background())
	h.est.next(t).fail(errors.New("refused"))
	recv(t, out)
	if _, err := h.s.AcquireDetached(context.Background()); !errors.Is(err, ErrBackoff) {
		t.Fatalf("during the backoff: %v", err)
	}
	if n := h.est.n.Load(); n != 1 {
		t.Fatalf("%d establishments, want 1", n)
	}
}

// Adopt puts a detached resource in service when the slot is empty: the
// next user takes it, without an establishment, and it outlives its
// adopter's hold.
func TestAdoptPublishesIntoAnEmptySlot(t *testing.T) {
	h := newHarness(t, nil)
	out := h.acquireDetachedAsync(context.Background())
	f := h.est.succeed(h.est.next(t))
	a := recv(t, out)
	if a.err != nil {
		t.Fatal(a.err)
	}
	if !h.s.Adopt(a.r) {
		t.Fatal("Adopt refused an empty slot")
	}
	if a.r.Detached() || a.r.Gen != 1 {
		t.Fatalf("adopted: detached %v, generation %d", a.r.Detached(), a.r.Gen)
	}
	if st := h.s.State(); st.Phase != Up || st.Gen != 1 || st.Holds != 1 || st.Detached != 0 {
		t.Fatalf("after Adopt: %+v", st)
	}
	if h.s.Adopt(a.r) {
		t.Fatal("a second Adopt succeeded")
	}
	next, err := h.s.Acquire(context.Background())
	if err != nil || next != a.r {
		t.Fatalf("the next user: %v, %v; want the adopted resource", next, err)
	}
	if n := h.est.n.Load(); n != 1 {
		t.Fatalf("%d establishments, want 1", n)
	}
	a.r.Release()
	next.Release()
	if f.closed.Load() {
		t.Fatal("the adopted resource closed with its last hold")
	}
	// In service, its death is watched as any other's.
	f.Close()
	waitFor(t, "the death seen", func() bool { _, ok := h.s.Current(); return !ok })
	if h.lost.Load() != 1 {
		t.Fatalf("OnLost told %d times", h.lost.Load())
	}
}

// Adopt refuses when the slot has a resource, or one is in flight: the
// detached resource stays its holder's, and closes when released, leaving
// the one in service alone.
func TestAdoptKeepsTheResourcePrivateWhenTheSlotIsTaken(t *testing.T) {
	h := newHarness(t, nil)
	out := h.acquireDetachedAsync(context.Background())
	f := h.est.succeed(h.est.next(t))
	d := recv(t, out)
	if d.err != nil {
		t.Fatal(d.err)
	}
	// In flight: refused.
	pending := h.acquireAsync(context.Background())
	c := h.est.next(t)
	waitFor(t, "establishing", func() bool { return h.s.State().Phase == Establishing })
	if h.s.Adopt(d.r) {
		t.Fatal("Adopt took the slot while an establishment was in flight")
	}
	h.est.succeed(c)
	shared := recv(t, pending)
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	// In service: refused.
	if h.s.Adopt(d.r) {
		t.Fatal("Adopt replaced the resource in service")
	}
	if !d.r.Detached() {
		t.Fatal("a refused Adopt changed the resource")
	}
	d.r.Release()
	if !f.closed.Load() || shared.r.V.closed.Load() {
		t.Fatalf("after the release: detached closed %v, shared closed %v", f.closed.Load(), shared.r.V.closed.Load())
	}
	if st := h.s.State(); st.Phase != Up || st.Gen != 1 || st.Detached != 0 {
		t.Fatalf("state: %+v", st)
	}
	shared.r.Release()
}

// A detached resource reported lost closes without touching the backoff.
func TestALostDetachedResourceCountsNothing(t *testing.T) {
	h := newHarness(t, nil)
	out := h.acquireDetachedAsync(context.Background())
	f := h.est.succeed(h.est.next(t))
	d := recv(t, out)
	h.s.Lost(d.r)
	if !f.closed.Load() {
		t.Fatal("Lost did not close the detached resource")
	}
	if st := h.s.State(); st.Failures != 0 || st.Phase != Idle || st.Detached != 0 || h.lost.Load() != 0 {
		t.Fatalf("state: %+v, OnLost %d", st, h.lost.Load())
	}
	if h.s.Adopt(d.r) {
		t.Fatal("a lost resource was adopted")
	}
	d.r.Release()
}

// A detached acquire shares a resource in service and an establishment in
// flight: it creates nothing.
func TestADetachedAcquireSharesWhatIsUpOrInFlight(t *testing.T) {
	h := newHarness(t, nil)
	first := h.acquireAsync(context.Background())
	c := h.est.next(t)
	waitFor(t, "establishing", func() bool { return h.s.State().Phase == Establishing })
	joined := h.acquireDetachedAsync(context.Background())
	time.Sleep(20 * time.Millisecond)
	h.est.succeed(c)
	a, j := recv(t, first), recv(t, joined)
	if a.err != nil || j.err != nil || j.r != a.r || j.r.Detached() {
		t.Fatalf("joined %+v, first %+v", j, a)
	}
	up, err := h.s.AcquireDetached(context.Background())
	if err != nil || up != a.r {
		t.Fatalf("with a resource up: %v, %v", up, err)
	}
	if n := h.est.n.Load(); n != 1 {
		t.Fatalf("%d establishments, want 1", n)
	}
	for range 3 {
		a.r.Release()
	}
	if st := h.s.State(); st.Holds != 0 || st.Phase != Up {
		t.Fatalf("state: %+v", st)
	}
}

// Close cuts a detached establishment in flight short with ErrClosed, and
// closes a detached resource still held.
func TestCloseEndsDetachedResources(t *testing.T) {
	h := newHarness(t, nil)
	out := h.acquireDetachedAsync(context.Background())
	f := h.est.succeed(h.est.next(t))
	held := recv(t, out)
	if held.err != nil {
		t.Fatal(held.err)
	}
	flight := h.acquireDetachedAsync(context.Background())
	h.est.next(t)
	h.s.Close()
	if a := recv(t, flight); !errors.Is(a.err, ErrClosed) {
		t.Fatalf("in flight at Close: %+v", a)
	}
	if !f.closed.Load() {
		t.Fatal("Close left a detached resource open")
	}
	if h.s.Adopt(held.r) {
		t.Fatal("a closed slot adopted")
	}
	held.r.Release()
}

// Drain cuts a detached establishment in flight short, and what it
// brings up anyway is closed.
func TestDrainEndsADetachedEstablishment(t *testing.T) {
	h := newHarness(t, nil)
	ignoring := func(ctx context.Context) (*fakeRes, error) {
		<-ctx.Done()
		return &fakeRes{done: make(chan struct{})}, nil // ignores its cancellation
	}
	var made *fakeRes
	h.s.cfg.Establish = func(ctx context.Context) (*fakeRes, error) {
		r, err := ignoring(ctx)
		made = r
		return r, err
	}
	out := h.acquireDetachedAsync(context.Background())
	waitFor(t, "the detached establishment", func() bool {
		h.s.mu.Lock()
		defer h.s.mu.Unlock()
		return len(h.s.detaching) == 1
	})
	h.s.Drain()
	if a := recv(t, out); !errors.Is(a.err, ErrClosed) {
		t.Fatalf("in flight at Drain: %+v", a)
	}
	if made == nil || !made.closed.Load() {
		t.Fatal("what the drained establishment brought up was not closed")
	}
}
