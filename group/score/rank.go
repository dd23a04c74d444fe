package score

import (
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// rankScratch is one rank's working rows, pooled across ranks.
type rankScratch struct {
	views     []rankView
	in        []bool // serving-pool member
	need      []bool // evaluated: views read
	health    []bool // the caller's eligibility, not the retry's excluded node
	clean     []bool // health and no unresolved hard failure
	util      []float64
	perf      []float64
	pc        []Candidate
	ch        []Challenger
	pairs     []pairResult // decide's comparisons against the incumbent, by row
	paired    []bool
	tgt       target // the rank's normalized target
	incumbent int    // decide's incumbent row, or -1
	now       int64  // the rank's time

	// normalize's memo.
	memoAddr netx.Addr
	memoTgt  target
	memoHas  bool
	memoOK   bool

	probes []int64    // probeRank's valid probe RTTs of the evaluated rows, sorted
	rows   []int      // the evaluated rows (need), ascending
	hist   *histEntry // decide's history entry: the commit's hint
	memo   viewMemo   // rankViews' cells of the latest target
	cmemo  cmpMemo    // decide's comparison cells of the latest incumbent

	// selectOrdinary's results.
	hasTarget    bool
	fam          netx.Family
	k            exactKey
	p            *Pool
	dead, streak int64 // deadFiltered and failStreakExcluded affected candidates
	multi        bool  // at least two distinct slot keys
	d            decision
}

// normalize is normalizeTarget, remembering the scratch's latest target:
// consecutive flows to one destination normalize it once.
func (sc *rankScratch) normalize(a netx.Addr) (target, bool, error) {
	if sc.memoOK && a == sc.memoAddr {
		return sc.memoTgt, sc.memoHas, nil
	}
	t, ok, err := normalizeTarget(a)
	if err == nil {
		sc.memoAddr, sc.memoTgt, sc.memoHas, sc.memoOK = a, t, ok, true
	}
	return t, ok, err
}

func (sc *rankScratch) grow(n int) {
	if cap(sc.views) < n {
		sc.views = make([]rankView, n)
		sc.in = make([]bool, n)
		sc.need = make([]bool, n)
		sc.health = make([]bool, n)
		sc.clean = make([]bool, n)
		sc.util = make([]float64, n)
		sc.perf = make([]float64, n)
		sc.pc = make([]Candidate, n)
		sc.ch = make([]Challenger, 0, n)
		sc.pairs = make([]pairResult, n)
		sc.paired = make([]bool, n)
	}
	sc.views, sc.in, sc.need, sc.health, sc.clean = sc.views[:n], sc.in[:n], sc.need[:n], sc.health[:n], sc.clean[:n]
	sc.util, sc.perf, sc.pc = sc.util[:n], sc.perf[:n], sc.pc[:n]
	sc.ch = sc.ch[:0]
	sc.pairs, sc.paired = sc.pairs[:n], sc.paired[:n]
	clear(sc.paired)
}

// anyMember reports whether a committed member is among the candidates,
// eligible and not the retry's excluded node.
func (sc *rankScratch) anyMember(r *Request) bool {
	var zero health.NodeID
	for i := range r.Cands {
		if sc.in[i] && r.Cands[i].Eligible && (r.Exclude == zero || r.Cands[i].Node != r.Exclude) {
			return true
		}
	}
	return false
}

// best is the highest-utility row among those with ok[i] and in[i].
func (sc *rankScratch) best(ok []bool, skip int) int {
	w := -1
	for _, i := range sc.rows { // ok is false outside the evaluated rows
		if i == skip || !ok[i] || !sc.in[i] {
			continue
		}
		if w < 0 || sc.util[i] > sc.util[w] {
			w = i
		}
	}
	return w
}

// ordinary is the ordinary first choice: the best clean member, else
// (every member in unresolved failure) the best healthy one.
func (sc *rankScratch) ordinary() int {
	if w := sc.best(sc.clean, -1); w >= 0 {
		return w
	}
	return sc.best(sc.health, -1)
}

// Rank selects one candidate of r for one flow at at. See the package
// documentation ("Ranking") for the rules; r.Cands' Utility and Winner
// are filled. A Peek changes nothing; a retry applies no pool change,
// earns nothing and counts no reason.
func (e *Engine) Rank(at time.Time, r *Request) Decision {
	if r.Preflight && !r.Peek {
		q := *r
		q.Peek = true
		d := e.Rank(at, &q)
		return d
	}
	n := len(r.Cands)
	if n == 0 {
		return Decision{Index: -1}
	}
	cfg := e.cfg.Load()
	g := cfg.groups[r.Group]
	if g == nil {
		return e.unscored(r)
	}
	sc := e.scratch.Get().(*rankScratch)
	defer e.scratch.Put(sc)
	tgt, hasTarget, terr := sc.normalize(r.Target)
	if terr != nil {
		return e.unscored(r)
	}
	e.selectOrdinary(at, r, sc, tgt, hasTarget)
	d, p, fam := sc.d, sc.p, sc.fam
	sc.p = nil // the pooled scratch keeps no pool alive
	sel := d.sel
	authorized := !r.Peek && !r.Retry
	if sel < 0 {
		return Decision{Index: -1}
	}
	if r.Peek {
		return Decision{Index: sel}
	}
	nc := &g.c.nets[netIndex(r.Network)]
	bk := BudgetKey{Group: r.Group, Network: r.Network, Family: fam}
	counted := authorized && sc.multi && !r.LastResort
	reason := NoReason
	choice, trial := sel, false
	var res Reservation
	var chTrained bool
	if authorized {
		e.budget.Earn(bk)
		p.Demand(at)
		nc.applied(r.Cands[sel].Node)
		if counted && hasTarget && !d.escape {
			res, choice, chTrained, trial = e.walk(sc, r, g, bk, sel, hasTarget, nc)
		}
		if counted {
			reason = d.reason
			if trial {
				reason = PeriodicExplore
				if !chTrained {
					reason = ColdExplore
				}
			}
			nc.reasons[reason].Add(1)
			nc.last.Store(uint32(reason))
			nc.verified(&sc.views[sel], hasTarget, trial)
			nc.deadFiltered.Add(sc.dead)
			nc.failStreakExcluded.Add(sc.streak)
			hint := sc.hist
			sc.hist = nil
			if sw, flap := e.hist.commit(histKey{r.Group, r.Network, fam, tgt}, r.Cands[sel].Node, hint); sw {
				nc.ordinarySwitch.Add(1)
				if flap {
					nc.switchFlap.Add(1)
				}
			}
		}
	}
	if trial {
		r.Cands[sel].Winner = false
		r.Cands[choice].Winner = true
	}
	a := &Attempt{e: e}
	a.g = g
	a.scope = Scope{Group: r.Group, Network: r.Network, Family: fam, Target: r.Target, Node: r.Cands[choice].Node}
	a.bk = bk
	a.trial, a.res = trial, res
	a.plan, a.planErr = p.Plan(at, r.Cands[choice].Key())
	if a.planErr == ErrNotInPool {
		a.planErr = nil // served outside the pool: no pool obligation
		a.noPlan = true
	}
	return Decision{Index: choice, Reason: reason, Attempt: a}
}

// selectOrdinary is a rank's evaluation up to the ordinary selection:
// the evaluated rows' views and utilities, the ordinary decision
// (sc.d) and, for an authorized rank, the Apply; a Peek's projection.
// Rank and Explain share it. A readonly request creates no pool.
func (e *Engine) selectOrdinary(at time.Time, r *Request, sc *rankScratch, tgt target, hasTarget bool) {
	n := len(r.Cands)
	t := at.UnixNano()
	sc.grow(n)
	sc.tgt, sc.now, sc.hasTarget = tgt, t, hasTarget

	fam := familyOf(r.Target, r.Family)
	k := exactKey{group: r.Group, net: r.Network, fam: fam, tgt: tgt}
	sc.fam, sc.k = fam, k
	authorized := !r.Peek && !r.Retry
	var p *Pool
	if r.Peek {
		if p = e.pools.peek(r.Group, r.Network); p == nil {
			p = NewPool(e.clock, r.Group, r.Network) // readonly: a projection only
		}
	} else {
		p = e.pools.Get(r.Group, r.Network)
	}
	sc.p = p
	init := p.mark(r.Cands, sc.in)
	// Only the serving pool's members are evaluated, unless the Apply
	// will rank every candidate (bootstrap, rerank, replacement, …).
	due, rot, hasRot := false, Key{}, false
	if authorized {
		due, rot, hasRot = p.due(at, r.Cands)
	}
	member := sc.anyMember(r) // the committed members, before any Apply
	all := !init || due || r.Preflight || !member
	var dead, streak int64
	multi := false // at least two distinct slot keys
	k0 := r.Cands[0].Key()
	rows := sc.rows[:0]
	for i := range sc.in {
		if !init {
			// Before the pool exists every candidate is a prospective
			// member (the bootstrap, or Peek's projection, ranks them all).
			sc.in[i] = true
		}
		sc.need[i] = all || sc.in[i]
		if sc.need[i] {
			rows = append(rows, i)
		}
		c := &r.Cands[i]
		c.Winner = false
		multi = multi || i > 0 && c.Key() != k0
		if !c.Eligible {
			dead++
		}
	}
	sc.rows = rows
	e.scorer.rankViews(k, hasTarget, r.Cands, sc.rows, sc.views, t, &sc.memo)
	var excl health.NodeID
	hasExcl := r.Exclude != excl
	clear(sc.health)
	clear(sc.clean)
	for _, i := range sc.rows {
		c := &r.Cands[i]
		v := &sc.views[i]
		hard := v.Exact.Hard || v.Family.Hard || v.Global.Hard
		sc.health[i] = c.Eligible && !(hasExcl && c.Node == r.Exclude)
		sc.clean[i] = sc.health[i] && !hard
		if c.Eligible && hard {
			streak++
		}
	}
	sc.dead, sc.streak, sc.multi = dead, streak, multi
	sc.utilities(r.Cands, sc.in, sc.need, sc.rows)

	if init && !member {
		// No member is available: serve outside the pool (the Apply may
		// replace members below) rather than refuse the flow.
		for i := range sc.in {
			sc.in[i] = true
		}
	}
	d := e.decide(sc, r, k, hasTarget)
	sel := d.sel
	if sel >= 0 {
		r.Cands[sel].Winner = true
	}
	// The Apply: skipped when it was quiet when the rank began and the
	// winner is not the rotation member (a quiet Apply commits nothing).
	if authorized && sel >= 0 && (all || hasRot && r.Cands[sel].Key() == rot) {
		for i := range r.Cands {
			sc.pc[i] = r.Cands[i]
			sc.pc[i].Eligible = sc.clean[i]
			if pv := sc.views[i].Probe; sc.need[i] && pv.Valid {
				sc.pc[i].ProbeRTT = pv.RTT
			} else {
				sc.pc[i].ProbeRTT = 0
			}
		}
		p.Rerank(at, sc.pc)
		p.mark(r.Cands, sc.in)
		if !sc.anyMember(r) {
			for i := range sc.in {
				sc.in[i] = true // still served outside the pool
			}
		}
		if !sc.in[sel] {
			// The Apply moved the winner's slot (a rotation or nested
			// change): serve the best remaining member.
			r.Cands[sel].Winner = false
			sel = sc.ordinary()
			d.sel = sel
			if sel >= 0 {
				r.Cands[sel].Winner = true
			}
		}
	} else if r.Peek && (!init || r.Preflight) && sel >= 0 {
		e.peekProjection(at, p, r, sc)
		if !sc.in[sel] {
			r.Cands[sel].Winner = false
			sel = sc.ordinary()
			d.sel = sel
			if sel >= 0 {
				r.Cands[sel].Winner = true
			}
		}
	}
	sc.d = d
}

// firstMember reports whether row i is the first pool-member row of its
// slot key: a scan of the members before it, bounded by k.
func firstMember(cands []Candidate, in []bool, i int) bool {
	ci := &cands[i]
	for j := range i {
		// Key equality: the same subgroup's slot, or the same direct node.
		if cj := &cands[j]; in[j] && cj.Subgroup == ci.Subgroup && (ci.Subgroup != "" || cj.Node == ci.Node) {
			return false
		}
	}
	return true
}

// peekProjection marks Peek's temporary projection of an uninitialized
// pool, or a preflight's prospective membership.
func (e *Engine) peekProjection(at time.Time, p *Pool, r *Request, sc *rankScratch) {
	for i := range r.Cands {
		sc.pc[i] = r.Cands[i]
		sc.pc[i].Eligible = sc.clean[i]
	}
	var slots []Slot
	if r.Preflight {
		slots = p.Project(at, sc.pc)
	} else {
		slots = p.Peek(at, sc.pc)
	}
	for i := range r.Cands {
		sc.in[i] = false
		k := r.Cands[i].Key()
		for _, s := range slots {
			if s.Key == k {
				sc.in[i] = true
			}
		}
	}
}

// unscored is the selection of a group the Engine does not score (not
// configured at this authority, or a target that cannot key evidence):
// the first eligible candidate, carrying an attempt that reports
// nothing.
func (e *Engine) unscored(r *Request) Decision {
	var zero health.NodeID
	for i := range r.Cands {
		c := &r.Cands[i]
		if c.Eligible && (r.Exclude == zero || c.Node != r.Exclude) {
			c.Winner = true
			if r.Peek {
				return Decision{Index: i}
			}
			return Decision{Index: i, Attempt: &Attempt{e: e, attemptPlan: attemptPlan{unscored: true}}}
		}
	}
	return Decision{Index: -1}
}

// decision is the ordinary selection and its reason.
type decision struct {
	sel    int
	reason Reason
	escape bool // an ordinary escape to a different leaf
}

// decide makes the ordinary selection: the incumbent of the (group,
// network, family, target) history when it is still a healthy, failure
// free member and no challenger earns promotion; otherwise an escape or
// the first choice.
func (e *Engine) decide(sc *rankScratch, r *Request, k exactKey, targeted bool) decision {
	sc.incumbent = -1
	sc.hist = nil
	u := sc.ordinary()
	if u < 0 {
		return decision{sel: -1}
	}
	inc, he, known := e.hist.incumbent(histKey{k.group, k.net, k.fam, k.tgt})
	sc.hist = he
	ii := -1
	if known {
		for i := range r.Cands {
			if r.Cands[i].Node == inc && sc.in[i] {
				ii = i
				break
			}
		}
	}
	switch {
	case !known:
		return decision{sel: u, reason: sc.firstChoice(u)}
	case ii < 0 || !sc.health[ii]:
		return decision{sel: u, reason: IncumbentIneligible, escape: true}
	case !sc.clean[ii]:
		if u != ii {
			return decision{sel: u, reason: FreshFailureBypass, escape: true}
		}
		return decision{sel: ii, reason: IncumbentHeld}
	case !trained(&sc.views[ii], targeted):
		if u != ii {
			return decision{sel: u, reason: sc.firstChoice(u)}
		}
		return decision{sel: ii, reason: IncumbentHeld}
	}
	// A trained, eligible, recovered incumbent: every eligible challenger
	// competes against it.
	sc.incumbent = ii
	vi := &sc.views[ii]
	bestC, bestP := -1, promotion{}
	tradeoff, uCompared := false, false
	ref := e.cmp.lockRef(k.group, k.net, k.fam, inc, k.tgt, targeted, sc.now, &sc.cmemo, len(r.Cands))
	defer ref.unlock()
	for _, c := range sc.rows { // clean is false outside them
		if c == ii || !sc.clean[c] || !sc.in[c] || r.Cands[c].Node == inc {
			continue
		}
		pr := ref.pairRow(c, r.Cands[c].Node, noCut, false)
		sc.pairs[c], sc.paired[c] = pr, true
		pm := promote(vi, &sc.views[c], pr, targeted)
		tradeoff = tradeoff || pm.tradeoff
		if c == u {
			uCompared = pm.compared
		}
		if pm.gain > bestP.gain {
			bestC, bestP = c, pm
		}
	}
	switch {
	case bestC >= 0:
		return decision{sel: bestC, reason: bestP.reason}
	case tradeoff:
		return decision{sel: ii, reason: DirectionalTradeoffHeld}
	case u != ii && !uCompared:
		return decision{sel: ii, reason: InsufficientEvidenceHeld}
	}
	return decision{sel: ii, reason: IncumbentHeld}
}

// firstChoice is the reason of a first choice u: coldExplore when no
// candidate has any evidence (deterministic cold exploration), else what
// separated u from the runner-up — reliability or performance.
func (sc *rankScratch) firstChoice(u int) Reason {
	cold := true
	for _, i := range sc.rows {
		if v := &sc.views[i]; v.Global.Attempts > 0 || v.Probe.Valid {
			cold = false
			break
		}
	}
	if cold {
		return ColdExplore
	}
	ru := sc.best(sc.clean, u)
	if ru < 0 {
		return ReliabilityWinner
	}
	if sc.views[u].Rate-sc.views[ru].Rate > PerfWeight*(sc.perf[u]-sc.perf[ru]) {
		return ReliabilityWinner
	}
	return PerformanceWinner
}
