package slot

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeRes is a resource that ends when closed or told to die.
type fakeRes struct {
	id     int
	done   chan struct{}
	once   sync.Once
	closed atomic.Bool
	killed atomic.Bool // a test reported it lost or made it die
	silent bool        // Done is nil: it never tells its death
}

func (f *fakeRes) Done() <-chan struct{} {
	if f.silent {
		return nil
	}
	return f.done
}

func (f *fakeRes) Close() {
	f.once.Do(func() { f.closed.Store(true); close(f.done) })
}

// clock is a manual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_000_000, 0)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// call is one Establish call, blocked until the test answers it.
type call struct {
	ctx    context.Context
	answer chan outcome
}

type outcome struct {
	res *fakeRes
	err error
}

// establisher hands each Establish call to the test, which answers it.
type establisher struct {
	calls  chan *call
	n      atomic.Int32
	made   atomic.Int32
	silent bool
}

func newEstablisher() *establisher { return &establisher{calls: make(chan *call, 16)} }

func (e *establisher) establish(ctx context.Context) (*fakeRes, error) {
	e.n.Add(1)
	c := &call{ctx: ctx, answer: make(chan outcome, 1)}
	e.calls <- c
	select {
	case o := <-c.answer:
		return o.res, o.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// next waits for the next Establish call.
func (e *establisher) next(t *testing.T) *call {
	t.Helper()
	select {
	case c := <-e.calls:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("no establishment started")
		return nil
	}
}

// succeed answers c with a new resource and returns it.
func (e *establisher) succeed(c *call) *fakeRes {
	r := &fakeRes{id: int(e.made.Add(1)), done: make(chan struct{}), silent: e.silent}
	c.answer <- outcome{res: r}
	return r
}

func (c *call) fail(err error) { c.answer <- outcome{err: err} }

type harness struct {
	s     *Slot[*fakeRes]
	est   *establisher
	clk   *clock
	fails atomic.Int32
	lost  atomic.Int32
}

func newHarness(t *testing.T, mod func(*Config[*fakeRes])) *harness {
	h := &harness{est: newEstablisher(), clk: newClock()}
	cfg := Config[*fakeRes]{
		Establish: h.est.establish,
		Now:       h.clk.Now,
		OnFail:    func(error) { h.fails.Add(1) },
		OnLost:    func(*fakeRes) { h.lost.Add(1) },
	}
	if mod != nil {
		mod(&cfg)
	}
	h.s = New(cfg)
	t.Cleanup(h.s.Close)
	return h
}

// acquireAsync runs Acquire on a goroutine of the test's.
func (h *harness) acquireAsync(ctx context.Context) chan acquired {
	out := make(chan acquired, 1)
	go func() {
		r, err := h.s.Acquire(ctx)
		out <- acquired{r, err}
	}()
	return out
}

type acquired struct {
	r   *Res[*fakeRes]
	err error
}

func recv(t *testing.T, c chan acquired) acquired {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(5 * time.Second):
		t.Fatal("Acquire did not return")
		return acquired{}
	}
}

// up establishes the first resource and returns it, held once.
func (h *harness) up(t *testing.T) *Res[*fakeRes] {
	t.Helper()
	c := h.acquireAsync(context.Background())
	h.est.succeed(h.est.next(t))
	a := recv(t, c)
	if a.err != nil {
		t.Fatal(a.err)
	}
	return a.r
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
