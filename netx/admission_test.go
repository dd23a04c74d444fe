package netx

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGateSizeFollowsTheDescriptorLimit(t *testing.T) {
	for _, c := range []struct {
		nofile uint64
		want   int
	}{{0, minProcessGate}, {64, minProcessGate}, {1024, 256}, {65536, 16384}, {1 << 30, maxProcessGate}} {
		if got := GateSizeFor(c.nofile); got != c.want {
			t.Errorf("GateSizeFor(%d) = %d, want %d", c.nofile, got, c.want)
		}
	}
	if g := ProcessGate(); g != ProcessGate() || g.Size() < minProcessGate {
		t.Fatal("the process gate is not one fixed gate")
	}
}

// A generation's limit is clamped to the process gate, and generations
// that overlap share the gate.
func TestAdmissionIsClampedToTheSharedGate(t *testing.T) {
	g := NewGate(3)
	old, next := NewAdmission(g, 64), NewAdmission(g, 2)
	if old.Stats().Limit != 3 || next.Stats().Limit != 2 {
		t.Fatalf("limits %d and %d, want 3 (clamped) and 2", old.Stats().Limit, next.Stats().Limit)
	}
	if NewAdmission(g, 0).Stats().Limit != 3 {
		t.Fatal("the default limit is not clamped")
	}
	ctx := context.Background()
	for range 2 {
		if err := old.Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := next.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	// The gate is full: the new generation, under its own limit, waits.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := next.Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an acquire past the shared gate returned %v", err)
	}
	if s := next.Stats(); s.InUse != 1 || s.Waiting != 0 {
		t.Fatalf("a refused acquire left %+v", s)
	}
	old.Release()
	if err := next.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if s := g.Stats(); s.InUse != 3 {
		t.Fatalf("gate %+v, want 3 in use", s)
	}
	old.Release()
	next.Release()
	next.Release()
	if s := g.Stats(); s.InUse != 0 || s.Waiting != 0 {
		t.Fatalf("gate %+v after every release", s)
	}
}

// Never more than the limit hold a permit; waiters are counted while they
// wait and every one gets through.
func TestAdmissionBoundsWhatIsInFlight(t *testing.T) {
	a := NewAdmission(NewGate(100), 4)
	var in, peak atomic.Int32
	var waitingSeen atomic.Bool
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := a.Acquire(context.Background()); err != nil {
				t.Error(err)
				return
			}
			n := in.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			if a.Stats().Waiting > 0 {
				waitingSeen.Store(true)
			}
			time.Sleep(time.Millisecond)
			in.Add(-1)
			a.Release()
		}()
	}
	wg.Wait()
	if peak.Load() > 4 {
		t.Fatalf("%d permits held at once, limit 4", peak.Load())
	}
	if !waitingSeen.Load() {
		t.Fatal("no waiter was ever counted")
	}
	if s := a.Stats(); s.InUse != 0 || s.Waiting != 0 {
		t.Fatalf("%+v after all", s)
	}
}

func TestAdmissionAllocatesNothing(t *testing.T) {
	a := NewAdmission(NewGate(8), 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if n := testing.AllocsPerRun(1000, func() {
		if a.Acquire(ctx) == nil {
			a.Release()
		}
	}); n != 0 {
		t.Fatalf("%v allocations per admission", n)
	}
}

func TestEstablishTimeout(t *testing.T) {
	for _, c := range []struct{ connect, want time.Duration }{
		{0, 40 * time.Second}, {time.Second, 10 * time.Second}, {2 * time.Second, 10 * time.Second},
		{3 * time.Second, 12 * time.Second}, {10 * time.Second, 40 * time.Second},
	} {
		if got := EstablishTimeout(c.connect); got != c.want {
			t.Errorf("EstablishTimeout(%v) = %v, want %v", c.connect, got, c.want)
		}
	}
}

// One establishment takes one permit, at its first physical connect,
// whatever the number of connects; it holds it until End.
func TestAnEstablishmentHoldsOnePermit(t *testing.T) {
	a := NewAdmission(NewGate(8), 1)
	e, ctx, cancel := Begin(context.Background(), a, time.Minute)
	defer cancel()
	Mark(ctx, PhaseResolve)
	if e.Phase() != PhaseResolve {
		t.Fatalf("phase %v", e.Phase())
	}
	for range 3 {
		if err := Admit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a.Stats().InUse != 1 {
		t.Fatalf("%d permits held", a.Stats().InUse)
	}
	if e.Phase() != PhaseResolve {
		t.Fatalf("admission left the phase at %v", e.Phase())
	}
	// A second establishment waits for the permit, and its wait is inside
	// its own deadline.
	e2, ctx2, cancel2 := Begin(context.Background(), a, 30*time.Millisecond)
	defer cancel2()
	err := Admit(ctx2)
	if !errors.Is(err, context.DeadlineExceeded) || !e2.Expired(ctx2) || e2.Phase() != PhaseAdmission {
		t.Fatalf("admit past the limit: %v (expired %v, phase %v)", err, e2.Expired(ctx2), e2.Phase())
	}
	var de *DeadlineError
	if !errors.As(err, &de) || de.After != 30*time.Millisecond {
		t.Fatalf("the cause does not name the deadline: %v", err)
	}
	e2.End()
	e.End()
	e.End()
	if a.Stats().InUse != 0 {
		t.Fatal("End did not release the permit")
	}
	if e.Expired(ctx) {
		t.Fatal("a live establishment reports expiry")
	}
	// Outside an establishment, Admit and Mark do nothing.
	if err := Admit(context.Background()); err != nil {
		t.Fatal(err)
	}
	Mark(context.Background(), PhaseTLS)
}

// A wait for a permit is reported once it ends, with whether it ended
// admitted; an Acquire served at once reports nothing.
func TestAdmissionReportsWaits(t *testing.T) {
	a := NewAdmission(NewGate(4), 1)
	type wait struct {
		d        time.Duration
		admitted bool
	}
	waits := make(chan wait, 4)
	a.SetWaitObserver(func(d time.Duration, admitted bool) { waits <- wait{d, admitted} })
	if err := a.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case w := <-waits:
		t.Fatalf("an immediate permit reported a wait %+v", w)
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := a.Acquire(ctx); err == nil {
		t.Fatal("a second permit over a limit of 1")
	}
	if w := <-waits; w.admitted || w.d < 20*time.Millisecond {
		t.Fatalf("abandoned wait reported as %+v", w)
	}
	done := make(chan error, 1)
	go func() { done <- a.Acquire(context.Background()) }()
	time.Sleep(10 * time.Millisecond)
	a.Release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if w := <-waits; !w.admitted || w.d <= 0 {
		t.Fatalf("admitted wait reported as %+v", w)
	}
	a.Release()
}
