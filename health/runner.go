package health

import (
	"context"
	"sync"
	"sync/atomic"
)

// runner is the engine's scheduling state. Goroutines: the loop (started
// by Start), at most one pass of each kind (cycle, recovery, urgent), and
// at most cap(sem) probe goroutines; all are added to wg under life and
// end with ctx, which Stop cancels before waiting for them.
type runner struct {
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{} // one token per probe in flight
	kick   chan struct{} // capacity 1: the loop has something to look at

	life    sync.Mutex // guards started, stopped and every wg.Add
	started bool
	stopped bool
	wg      sync.WaitGroup

	// Timer events not yet handled by the loop.
	cycleDue, recoveryDue atomic.Int64
	// stopRecovery disarms the recovery timer: set by Start, then owned
	// by the loop.
	stopRecovery func() bool
	// A pass of the kind is running.
	cycleBusy, recoveryBusy, urgentBusy atomic.Bool

	umu        sync.Mutex // guards the urgent set; a leaf lock
	urgentSet  map[NodeID]urgentKind
	urgentAll  bool
	urgentAdds int // requests in the set, for busy

	busy tracker
}

// urgentKind is what an urgent probe of a node covers.
type urgentKind uint8

const (
	urgentTCP  urgentKind = 1 << iota // the TCP path (an emergency probe)
	urgentRest                        // the UDP path and the node's check_urls
	urgentFull = urgentTCP | urgentRest
)

func (r *runner) init(limit int) {
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.sem = make(chan struct{}, limit)
	r.kick = make(chan struct{}, 1)
	r.urgentSet = make(map[NodeID]urgentKind)
	r.busy.init()
}

func (r *runner) poke() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// spawn runs fn on a goroutine the runner owns, unless Stop was called.
func (r *runner) spawn(fn func()) bool {
	r.life.Lock()
	if r.stopped {
		r.life.Unlock()
		return false
	}
	r.wg.Add(1)
	r.life.Unlock()
	go func() {
		defer r.wg.Done()
		fn()
	}()
	return true
}

func (r *runner) start(e *Engine) {
	r.life.Lock()
	defer r.life.Unlock()
	if r.started || r.stopped {
		return
	}
	r.started = true
	// The first cycle is due at once and the recovery timer armed before
	// Start returns, so a test advancing a fake clock right after sees them.
	r.busy.add(1)
	r.cycleDue.Add(1)
	r.poke()
	r.stopRecovery = e.clock.AfterFunc(e.recovery, e.onRecovery)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		e.loop()
	}()
}

func (r *runner) stop() {
	r.life.Lock()
	r.stopped = true
	r.life.Unlock()
	r.cancel()
	r.wg.Wait()
}

// loop owns the timers: it starts passes as their timers fire and urgent
// requests arrive, at most one pass of each kind at a time (a cycle due
// while the previous one still runs is skipped).
func (e *Engine) loop() {
	r := &e.run
	var stopCycle func() bool
	defer func() {
		if stopCycle != nil {
			stopCycle()
		}
		r.stopRecovery()
	}()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.kick:
		}
		if n := r.cycleDue.Swap(0); n > 0 {
			stopCycle = e.clock.AfterFunc(e.interval, e.onCycle)
			if !e.startPass(&r.cycleBusy, e.cycle) {
				e.log.Debug("health: a probe cycle is still running; this one is skipped")
			}
			r.busy.done(int(n))
		}
		if n := r.recoveryDue.Swap(0); n > 0 {
			r.stopRecovery = e.clock.AfterFunc(e.recovery, e.onRecovery)
			e.startPass(&r.recoveryBusy, e.recoveryPass)
			r.busy.done(int(n))
		}
		if r.urgentBusy.Load() {
			continue // the running pass pokes when done
		}
		set, all, adds := r.takeUrgent()
		if adds > 0 {
			e.startPass(&r.urgentBusy, func(ctx context.Context) { e.urgentPass(ctx, set, all) })
			r.busy.done(adds)
		}
	}
}

// onCycle and onRecovery are the timer functions: they only count the
// event and wake the loop.
func (e *Engine) onCycle()    { e.run.fire(&e.run.cycleDue) }
func (e *Engine) onRecovery() { e.run.fire(&e.run.recoveryDue) }

func (r *runner) fire(due *atomic.Int64) {
	r.busy.add(1)
	due.Add(1)
	r.poke()
}

// startPass runs pass on its own goroutine unless one of its kind runs.
func (e *Engine) startPass(running *atomic.Bool, pass func(context.Context)) bool {
	r := &e.run
	if !running.CompareAndSwap(false, true) {
		return false
	}
	r.busy.add(1)
	ok := r.spawn(func() {
		defer func() {
			running.Store(false)
			r.poke()
			r.busy.done(1)
		}()
		pass(r.ctx)
	})
	if !ok {
		running.Store(false)
		r.busy.done(1)
	}
	return ok
}

// urgent asks for probes of ids now, ignoring idling, cooldowns and
// parked paths.
func (e *Engine) urgent(ids []NodeID, k urgentKind) {
	r := &e.run
	r.umu.Lock()
	for _, id := range ids {
		r.urgentSet[id] |= k
	}
	r.urgentAdds++
	r.busy.add(1)
	r.umu.Unlock()
	r.poke()
}

// urgentEverything asks for a probe of every node and check_url now.
func (e *Engine) urgentEverything() {
	r := &e.run
	r.umu.Lock()
	r.urgentAll = true
	r.urgentAdds++
	r.busy.add(1)
	r.umu.Unlock()
	r.poke()
}

func (r *runner) takeUrgent() (set map[NodeID]urgentKind, all bool, adds int) {
	r.umu.Lock()
	defer r.umu.Unlock()
	set, all, adds = r.urgentSet, r.urgentAll, r.urgentAdds
	if adds > 0 {
		r.urgentSet = make(map[NodeID]urgentKind)
		r.urgentAll, r.urgentAdds = false, 0
	}
	return set, all, adds
}

// submit runs job on a probe goroutine once a token is free, and adds it
// to wg. It returns false when ctx ended or the engine stopped first.
func (e *Engine) submit(ctx context.Context, wg *sync.WaitGroup, job func(context.Context)) bool {
	r := &e.run
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	if ctx.Err() != nil {
		<-r.sem
		return false
	}
	r.busy.add(1)
	wg.Add(1)
	ok := r.spawn(func() {
		defer func() {
			<-r.sem
			wg.Done()
			r.busy.done(1)
		}()
		job(ctx)
	})
	if !ok {
		<-r.sem
		wg.Done()
		r.busy.done(1)
	}
	return ok
}

// join returns ctx cancelled also by Stop.
func (e *Engine) join(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if e.run.ctx.Err() != nil {
		cancel() // stopped: at once, not from AfterFunc's goroutine
	}
	stop := context.AfterFunc(e.run.ctx, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// tracker counts the runner's outstanding work (timer events not handled,
// passes and probes running), so a test with a fake clock can wait until
// the engine has settled after advancing it.
type tracker struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (t *tracker) init() { t.cond = sync.NewCond(&t.mu) }

func (t *tracker) add(n int) {
	t.mu.Lock()
	t.n += n
	t.mu.Unlock()
}

func (t *tracker) done(n int) {
	t.mu.Lock()
	t.n -= n
	if t.n <= 0 {
		t.cond.Broadcast()
	}
	t.mu.Unlock()
}

// wait returns once no work is outstanding.
func (t *tracker) wait() {
	t.mu.Lock()
	for t.n > 0 {
		t.cond.Wait()
	}
	t.mu.Unlock()
}
