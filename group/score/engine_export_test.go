package score

import (
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// FlowOn begins a business flow on sc outside any rank (no pool plan, no
// trial): the tests' way to give one node evidence without moving the
// selection history.
func (e *Engine) FlowOn(sc Scope, at time.Time) *Flow {
	g := e.cfg.Load().groups[sc.Group]
	rep, err := e.scorer.Begin(sc, at)
	if err != nil || g == nil {
		panic(err)
	}
	fam := familyOf(sc.Target, sc.Family)
	return &Flow{e: e, rep: rep, g: g, scope: sc, bk: BudgetKey{Group: sc.Group, Network: sc.Network, Family: fam}, began: at.UnixNano()}
}

// PairBasis reads the comparison of challenger c against incumbent i for
// sc's target: its basis (0 none, 1 exact, 2 common, 3 probe) and its
// response, up and down gains with whether each is known.
func (e *Engine) PairBasis(sc Scope, i, c Scope) (basis int, gains [3]float64, known [3]bool) {
	tgt, has, _ := normalizeTarget(sc.Target)
	pr := e.cmp.pair(sc.Group, sc.Network, familyOf(sc.Target, sc.Family), i.Node, c.Node, tgt, has, e.clock.Now().UnixNano())
	for m := range pr.m {
		gains[m], known[m] = pr.m[m].gain, pr.m[m].known
	}
	return int(pr.basis), gains, known
}

// CheckLedgers checks every budget scope's inequality and counts.
func (e *Engine) CheckLedgers() error { return e.budget.CheckLedgers() }

// PoolHas reports whether node is a committed member of group's pool on
// network.
func (e *Engine) PoolHas(group GroupID, network netx.Network, node health.NodeID) bool {
	p := e.pools.peek(group, network)
	return p != nil && p.Contains(DirectKey(node))
}
