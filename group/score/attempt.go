package score

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// ErrAttemptDone is Begin's refusal of an attempt already begun or
// released.
var ErrAttemptDone = errors.New("score: attempt already begun or released")

// attemptPlan is an Attempt's pending work: the scope it reports on, its
// captured pool obligation and, for a trial, its reservation.
type attemptPlan struct {
	g        *groupState
	scope    Scope
	bk       BudgetKey
	plan     Plan
	planErr  error
	noPlan   bool // served outside the pool: no obligation to recheck
	trial    bool
	res      Reservation
	unscored bool          // reports nothing (a group or target the Engine does not score)
	state    atomic.Uint32 // 0 pending, 1 begun, 2 released
}

// Trial reports whether the attempt is a funded optional trial.
func (a *Attempt) Trial() bool { return a.trial }

// Begin starts the attempt's flow at at, when node-specific work begins:
// the serving-pool obligation is rechecked (a stale plan is refused with
// a *CancelError and its unbegun reservation refunded), a trial's
// reservation is spent, and the flow's Reporter begins. An ordinary
// attempt whose (group, node) left the configuration since the rank
// proceeds unscored; a trial refuses. A second Begin, or one after
// Release, returns ErrAttemptDone.
func (a *Attempt) Begin(at time.Time) (*Flow, error) {
	if !a.state.CompareAndSwap(0, 1) {
		return nil, ErrAttemptDone
	}
	if a.unscored {
		return &Flow{}, nil
	}
	e := a.e
	err := a.planErr
	if err == nil && !a.noPlan {
		err = a.plan.pool.Begin(a.plan)
	}
	if err != nil {
		if a.trial {
			e.budget.Release(a.res)
		}
		return nil, err
	}
	if a.trial {
		if err := e.budget.Begin(a.res); err != nil {
			return nil, err
		}
	}
	rep, err := e.scorer.Begin(a.scope, at)
	if err != nil {
		if a.trial {
			e.budget.Settle(a.res, TrialInconclusive)
			return nil, err
		}
		return &Flow{}, nil
	}
	f := &Flow{e: e, rep: rep, g: a.g, scope: a.scope, bk: a.bk, trial: a.trial, res: a.res, began: at.UnixNano()}
	f.pool = e.pools.peek(a.scope.Group, a.scope.Network)
	if !a.trial {
		if u := a.g.leaves[a.scope.Node]; u != nil {
			f.unf = &u.unfinished[netIndex(a.scope.Network)]
			f.unf.Add(1)
		}
	}
	return f, nil
}

// Release drops an unbegun attempt at at, refunding its reservation.
func (a *Attempt) Release(at time.Time) {
	if !a.state.CompareAndSwap(0, 2) {
		return
	}
	if a.trial {
		a.e.budget.Release(a.res)
	}
}

// Flow is one begun attempt: the flow's Reporter, plus what the ranking
// and the budget learn from it. Exactly one of Settle, Fail and Cancel
// ends it; later calls are ignored. Its methods are safe for concurrent
// use (the two copy directions report progress concurrently). The zero
// Flow (an unscored attempt) reports nothing.
type Flow struct {
	e     *Engine
	rep   *Reporter
	g     *groupState
	scope Scope
	bk    BudgetKey
	trial bool
	res   Reservation
	unf   *atomic.Int32
	began int64
	pool  *Pool // the group's pool on the network at Begin (nil: none)

	mu      sync.Mutex
	setupAt int64
	win     windows
	ended   bool
}

// Setup records that the proxy session was set up at at (first call).
func (f *Flow) Setup(at time.Time) {
	if f.rep == nil {
		return
	}
	t := at.UnixNano()
	f.mu.Lock()
	if f.ended || f.setupAt != 0 {
		f.mu.Unlock()
		return
	}
	f.setupAt = t
	f.mu.Unlock()
	f.rep.setupObserved(at, time.Duration(t-f.began))
}

// Response records the flow's first response byte at at: response
// latency and eligible RX.
func (f *Flow) Response(at time.Time) {
	if f.rep == nil {
		return
	}
	f.mu.Lock()
	if f.ended || f.win.responded {
		f.mu.Unlock()
		return
	}
	f.win.responded = true
	f.mu.Unlock()
	lat, rec := f.rep.responseObserved(at)
	if lat > 0 {
		f.compare(cmpResponse, at, float64(lat)/float64(time.Millisecond))
	}
	if rec {
		f.e.budget.recovered(f.bk, f.scope.Node, f.rep.key.tgt)
	}
}

// Progress records tx bytes accepted up and rx bytes delivered down at
// at, since the previous call: eligible RX, and the directional goodput
// windows.
func (f *Flow) Progress(at time.Time, tx, rx int64) {
	if f.rep == nil || tx <= 0 && rx <= 0 {
		return
	}
	t := at.UnixNano()
	f.mu.Lock()
	if f.ended {
		f.mu.Unlock()
		return
	}
	closed := f.win.progress(t, tx, rx)
	up, down := f.win.upBps, f.win.downBps
	f.mu.Unlock()
	if f.rep.progressObserved(at, tx, rx) {
		f.e.budget.recovered(f.bk, f.scope.Node, f.rep.key.tgt)
	}
	if closed {
		f.goodput(at, up, down)
	}
}

func (f *Flow) goodput(at time.Time, up, down float64) {
	if up > 0 {
		f.rep.goodputObserved(metricUp, at, up)
		f.compare(cmpUp, at, up)
	}
	if down > 0 {
		f.rep.goodputObserved(metricDown, at, down)
		f.compare(cmpDown, at, down)
	}
}

// compare feeds the comparison store, admission following serving
// membership.
func (f *Flow) compare(m cmpMetric, at time.Time, v float64) {
	if !f.rep.hasTarget {
		return
	}
	k := cmpKey{group: f.scope.Group, node: f.scope.Node, net: f.scope.Network, fam: uint8(f.rep.key.fam), tgt: f.rep.key.tgt}
	f.e.cmp.add(k, int64(BlockWidth), m, at.UnixNano(), v, f.rep.id, f.admits())
}

// end marks the flow ended at t; false when it already was.
func (f *Flow) end(t int64) (bool, float64, float64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return false, 0, 0, false
	}
	f.ended = true
	closed := f.win.finish(t)
	if f.unf != nil {
		f.unf.Add(-1)
	}
	if f.trial {
		nc := &f.g.c.nets[netIndex(f.scope.Network)]
		nc.trialElapsed.Add(max(0, t-f.began))
		if f.setupAt != 0 {
			nc.trialSetup.Add(max(0, f.setupAt-f.began))
		}
	}
	return true, f.win.upBps, f.win.downBps, closed
}

// Settle ends the flow without a failure at at: a useful completion when
// it had eligible RX (the pool's failure run restarts; a trial succeeds),
// otherwise no outcome (a trial is inconclusive).
func (f *Flow) Settle(at time.Time) {
	if f.rep == nil {
		return
	}
	ok, up, down, closed := f.end(at.UnixNano())
	if !ok {
		return
	}
	if closed {
		f.goodput(at, up, down)
	}
	useful := f.rep.useful()
	f.rep.Settle(at)
	if useful {
		if f.pool != nil {
			f.pool.NodeOK(f.scope.Node)
		}
	}
	if f.trial {
		o := TrialInconclusive
		if useful {
			o = TrialSucceeded
		}
		f.e.budget.Settle(f.res, o)
	}
}

// Fail ends the flow with failure failure at at. A node-scoped failure
// (or any failure of targetless work) counts toward the pool's early
// replacement, fences the node's comparison evidence and backs off the
// node's trials in the scope; a target-scoped one fences only that
// target's comparison cell and backs off only the node's trials on that
// target. A trial settles failed with that provenance (a target refusal:
// refused, no trial outcome and no backoff).
func (f *Flow) Fail(at time.Time, failure Failure) {
	if f.rep == nil {
		return
	}
	ok, _, _, _ := f.end(at.UnixNano())
	if !ok {
		return
	}
	f.rep.Fail(at, failure)
	tgt := f.rep.key.tgt
	nodeScoped := !f.rep.hasTarget || failure.Kind.Provenance() == NodeScoped
	if nodeScoped {
		if f.pool != nil {
			f.pool.NodeFailed(f.scope.Node, at)
		}
		f.e.cmp.fence(f.scope.Group, f.scope.Network, f.scope.Node, f.rep.key.fam, nil)
	} else {
		f.e.cmp.fence(f.scope.Group, f.scope.Network, f.scope.Node, f.rep.key.fam, &tgt)
	}
	switch {
	case f.trial && failure.Kind == TargetRefused:
		f.e.budget.Settle(f.res, TrialRefused)
	case f.trial && nodeScoped:
		f.e.budget.Settle(f.res, TrialFailed)
	case f.trial:
		f.e.budget.Settle(f.res, TrialTargetFailed)
	case nodeScoped:
		f.e.budget.Failed(f.bk, f.scope.Node)
	case failure.Kind != TargetRefused:
		f.e.budget.targetFailed(f.bk, f.scope.Node, tgt)
	}
}

// Cancel ends the flow neutrally at at (client side, rejection,
// shutdown): no outcome, factual RX kept; a trial is inconclusive.
func (f *Flow) Cancel(at time.Time) {
	if f.rep == nil {
		return
	}
	ok, _, _, _ := f.end(at.UnixNano())
	if !ok {
		return
	}
	f.rep.Cancel(at)
	if f.trial {
		f.e.budget.Settle(f.res, TrialInconclusive)
	}
}

// admits is comparison-cell admission for the flow's node: membership of
// the pool it was planned in (a pool replaced by a reload since has no
// members), the four recent Apply winners, or initial collection.
func (f *Flow) admits() bool {
	if f.pool == nil {
		return f.e.admits(f.g, f.scope.Network, f.scope.Node)
	}
	init, member := f.pool.admits(f.scope.Node)
	if !init || member {
		return true
	}
	return f.g.c.nets[netIndex(f.scope.Network)].recentWinner(f.scope.Node)
}
