package score

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	pr := e.cmp.pair(sc.Group, sc.Network, familyOf(sc.Target, sc.Family), i.Node, c.Node, tgt, has, e.clock.Now().UnixNano(), noCut, false)
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

// State renders every piece of mutable Engine state a readonly read must
// leave alone: counters, ledgers with their trial tables and member
// states, both LRUs' order with each cell's fields, the pools, the
// history's order, the comparison store and the sequence numbers.
func (e *Engine) State() string {
	var b strings.Builder
	st, _ := json.Marshal(e.Stats())
	b.Write(st)
	e.budget.mu.Lock()
	fmt.Fprintf(&b, "\nbudget seq %d tick %d\n", e.budget.seq, e.budget.tick)
	keys := slices.SortedFunc(maps.Keys(e.budget.scopes), func(x, y BudgetKey) int {
		return cmp.Or(bytes.Compare(x.Group[:], y.Group[:]), cmp.Compare(x.Network, y.Network), cmp.Compare(x.Family, y.Family))
	})
	for _, k := range keys {
		w := e.budget.scopes[k]
		fmt.Fprintf(&b, "scope %v n %d B %d e16 %d V %d R %d succ %v fail %v exp %d used %d hist %+v\n", k, w.n, w.cold, w.e16, w.spent, w.reserved, w.succ, w.fail, w.expiry, w.used, w.hist)
		var lines []string
		for tk, tr := range w.trials {
			lines = append(lines, fmt.Sprintf("  trial %v %d %q %+v", tk.node, tk.q, tk.tgt.text, tr))
		}
		for n, m := range w.members {
			lines = append(lines, fmt.Sprintf("  member %v %+v", n, m))
		}
		slices.Sort(lines)
		b.WriteString(strings.Join(lines, "\n"))
		b.WriteByte('\n')
	}
	var dl []string
	for k, d := range e.budget.business {
		dl = append(dl, fmt.Sprintf("demand %v %+v\n", k, *d))
	}
	slices.Sort(dl)
	b.WriteString(strings.Join(dl, ""))
	e.budget.mu.Unlock()
	e.scorer.mu.Lock()
	fmt.Fprintf(&b, "scorer seq %d\n", e.scorer.seq)
	// Children apply their global aggregate's node record lazily, on any
	// read: render them as derived (synced), which every read sees.
	e.scorer.exact.each(func(k exactKey, c *cell) { c.sync(e.scorer.agg.peek(k.global())) })
	e.scorer.agg.each(func(k aggKey, c *cell) {
		if k.fam != noFamily {
			c.sync(e.scorer.agg.peek(k.global()))
		}
	})
	e.scorer.exact.each(func(k exactKey, c *cell) {
		fmt.Fprintf(&b, "exact %v %q %+v %+v\n", k.node, k.tgt.text, c.ev, *c)
	})
	e.scorer.agg.each(func(k aggKey, c *cell) {
		fmt.Fprintf(&b, "agg %v %d %+v %+v\n", k.node, k.fam, c.ev, *c)
	})
	e.scorer.mu.Unlock()
	fmt.Fprintf(&b, "pools %d\n", e.pools.Len())
	e.pools.mu.Lock()
	var pl []string
	for k, p := range e.pools.pools {
		p.mu.Lock()
		pl = append(pl, fmt.Sprintf("pool %v %v init %v gen %d k %d slots %+v rerank %d cursor %d demand %v@%d\n", k.group, k.net, p.init, p.gen, p.k, p.slots, p.lastRerank, p.cursor, p.demand, p.demandAt))
		p.mu.Unlock()
	}
	slices.Sort(pl)
	b.WriteString(strings.Join(pl, ""))
	e.pools.mu.Unlock()
	e.hist.mu.Lock()
	for x := e.hist.head.older; x != &e.hist.head; x = x.older {
		fmt.Fprintf(&b, "hist %q %v %v %v %d\n", x.key.tgt.text, x.last, x.prev, x.hasPrev, x.since)
	}
	e.hist.mu.Unlock()
	e.cmp.mu.Lock()
	fmt.Fprintf(&b, "cmp tick %d gen %d bytes %d cells %d\n", e.cmp.tick, e.cmp.gen, e.cmp.bytes, len(e.cmp.cells))
	e.cmp.mu.Unlock()
	return b.String()
}

// BlockStart is the business comparison block holding at.
func BlockStart(at time.Time) time.Time {
	t := at.UnixNano()
	return time.Unix(0, t-t%int64(BlockWidth)).UTC()
}

// HintCut reports node's active carrier-pressure cut on network in group
// at at.
func (e *Engine) HintCut(group GroupID, node health.NodeID, network netx.Network, at time.Time) (time.Time, bool) {
	g := e.cfg.Load().groups[group]
	if g == nil {
		return time.Time{}, false
	}
	c := g.hintCut(node, netIndex(network), at.UnixNano())
	if c == noCut {
		return time.Time{}, false
	}
	return time.Unix(0, c).UTC(), true
}
