package netx

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// DefaultMaxConcurrentDials is a generation's admission limit when the
// configuration sets none.
const DefaultMaxConcurrentDials = 64

// The process gate is a quarter of the descriptor limit, within these
// bounds. A dial in flight holds at least two descriptors (the client's and
// the upstream's socket) and established flows need the rest: a quarter
// keeps dials stuck on silent servers from taking the descriptors every
// other flow needs.
const (
	minProcessGate = 16
	maxProcessGate = 16384
)

// Gate is the process-wide bound on dials in admission, shared by every
// generation. Its size is fixed when it is made.
type Gate struct {
	slots   chan struct{}
	waiting atomic.Int64
}

// NewGate returns a gate of n slots (at least 1).
func NewGate(n int) *Gate {
	return &Gate{slots: make(chan struct{}, max(n, 1))}
}

// GateSizeFor is the process gate for a descriptor limit.
func GateSizeFor(nofile uint64) int {
	return int(min(max(nofile/4, minProcessGate), maxProcessGate))
}

var (
	processGateOnce sync.Once
	processGate     *Gate
)

// ProcessGate is the gate of this process, computed once, at its first
// use, from the soft descriptor limit then in force.
func ProcessGate() *Gate {
	processGateOnce.Do(func() {
		var lim syscall.Rlimit
		n := uint64(1024)
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur > 0 {
			n = lim.Cur
		}
		processGate = NewGate(GateSizeFor(n))
	})
	return processGate
}

// Size is the gate's number of slots.
func (g *Gate) Size() int { return cap(g.slots) }

// Stats is what a gate or an admission has in flight.
type Stats struct {
	Limit   int   // slots
	InUse   int   // permits held
	Waiting int64 // dials waiting for a permit
}

// Stats reads the gate's counts.
func (g *Gate) Stats() Stats {
	return Stats{Limit: cap(g.slots), InUse: len(g.slots), Waiting: g.waiting.Load()}
}

// acquire takes a slot; when it has to wait and *waited is zero, it sets
// *waited to when the wait began.
func (g *Gate) acquire(ctx context.Context, waited *time.Time) error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	if waited.IsZero() {
		*waited = time.Now()
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case g.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (g *Gate) release() { <-g.slots }

// Admission is one generation's dial admission: at most its limit of
// physical proxied connects and protocol handshakes in flight, each also
// holding a slot of the process gate. Acquire and Release allocate nothing.
type Admission struct {
	gate    *Gate
	local   chan struct{}
	waiting atomic.Int64
	onWait  func(wait time.Duration, admitted bool) // SetWaitObserver; nil: none
}

// NewAdmission returns a generation's admission of limit permits (<= 0:
// DefaultMaxConcurrentDials), clamped to the gate's size.
func NewAdmission(g *Gate, limit int) *Admission {
	if limit <= 0 {
		limit = DefaultMaxConcurrentDials
	}
	return &Admission{gate: g, local: make(chan struct{}, min(limit, g.Size()))}
}

// Acquire waits for a permit of the generation, then for a slot of the
// process gate, until ctx ends. An Acquire that has to wait, for either, reports the wait to the
// observer once it ends (SetWaitObserver).
func (a *Admission) Acquire(ctx context.Context) error {
	var waited time.Time // zero while nothing was waited for
	select {
	case a.local <- struct{}{}:
	default:
		waited = time.Now()
		a.waiting.Add(1)
		select {
		case a.local <- struct{}{}:
			a.waiting.Add(-1)
		case <-ctx.Done():
			a.waiting.Add(-1)
			a.waitEnded(waited, false)
			return context.Cause(ctx)
		}
	}
	if err := a.gate.acquire(ctx, &waited); err != nil {
		<-a.local
		a.waitEnded(waited, false)
		return err
	}
	if !waited.IsZero() {
		a.waitEnded(waited, true)
	}
	return nil
}

// SetWaitObserver has f told of every wait for a permit once it ended:
// how long it lasted and whether it ended with the permit (otherwise the
// dial's context ended first). An Acquire served at once reports nothing.
// It is set before the admission is used; f must not block.
func (a *Admission) SetWaitObserver(f func(wait time.Duration, admitted bool)) { a.onWait = f }

func (a *Admission) waitEnded(since time.Time, admitted bool) {
	if a.onWait != nil {
		a.onWait(time.Since(since), admitted)
	}
}

// Release returns a permit taken by Acquire.
func (a *Admission) Release() {
	a.gate.release()
	<-a.local
}

// Stats reads the generation's counts.
func (a *Admission) Stats() Stats {
	return Stats{Limit: cap(a.local), InUse: len(a.local), Waiting: a.waiting.Load()}
}

// Gate is the process gate the admission is clamped to.
func (a *Admission) Gate() *Gate { return a.gate }
