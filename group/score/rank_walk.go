package score

import "slices"

// The rank's optional-work side: the evaluator of missing evidence (the
// challengers' open questions), the single dispatch walk it feeds, and
// the configured-probe order that breaks its ties. Explain reads the
// same evaluator.

// walk is the single optional-work dispatch of an authorized targeted
// rank: the evaluated challengers (the other healthy pool members) with
// their open questions, in the budget's dispatch order.
func (e *Engine) walk(sc *rankScratch, r *Request, g *groupState, bk BudgetKey, sel int, targeted bool, nc *netCounters) (res Reservation, choice int, wasTrained, ok bool) {
	vs := &sc.views[sel]
	e.challengers(sc, r, g, bk, sel, targeted, false)
	if len(sc.ch) == 0 {
		return Reservation{}, sel, false, false
	}
	wr := e.budget.Walk(bk, Selection{Usable: vs.Exact.Usable, Completions: int(vs.Support)}, sc.ch)
	nc.budgetBlocked.Add(int64(wr.BudgetBlocked))
	nc.inFlight.Add(int64(wr.InFlight))
	nc.exploreBackedOff.Add(int64(wr.BackedOff))
	if wr.Admitted < 0 {
		return Reservation{}, sel, false, false
	}
	ch := sc.ch[wr.Admitted]
	return wr.Reservation, ch.idx, ch.Trained, true
}

// challengers is the evaluator of missing evidence: it fills sc.ch with
// the evaluated challengers of selection sel (the other healthy pool
// members, one per slot, none on the selection's node) and their open
// questions — recovery, qualification, availability, a pair — in
// candidate order; with all also those with nothing open (NoQuestion).
// The rank's dispatch walk and Explain both read it.
func (e *Engine) challengers(sc *rankScratch, r *Request, g *groupState, bk BudgetKey, sel int, targeted, all bool) {
	incumbentSel := sc.incumbent == sel
	sc.ch = sc.ch[:0]
	// The freshness cut of the selection's pairs: its latest response
	// degradation on the exact target (a targeted read only) and its
	// runtime's fresh carrier-pressure hint.
	ni := netIndex(r.Network)
	hinted := g.hintsFresh(ni, sc.now)
	selCut := int64(noCut)
	if hinted {
		selCut = g.leaves[r.Cands[sel].Node].cut(ni, sc.now)
	}
	if targeted && sc.views[sel].degraded != 0 {
		selCut = max(selCut, sc.views[sel].degraded)
	}
	sc.sortProbes()
	for _, c := range sc.rows { // health is false outside them
		if c == sel || !sc.in[c] || !sc.health[c] || r.Cands[c].Node == r.Cands[sel].Node || !firstMember(r.Cands, sc.in, c) {
			continue
		}
		v := &sc.views[c]
		ls := g.leaves[r.Cands[c].Node]
		hard := v.Exact.Hard || v.Family.Hard || v.Global.Hard
		var q Question
		pairProgress := 0
		switch {
		case hard:
			q = Recovery
		case !qualifiedIn(v, targeted):
			q = Qualification
		case !usableIn(v, targeted):
			q = Availability
		default:
			cut := selCut
			if hinted {
				cut = max(cut, ls.cut(ni, sc.now))
			}
			pr := sc.pairs[c]
			if !sc.paired[c] || !incumbentSel || cut != noCut {
				pr = e.cmp.pair(bk.Group, bk.Network, bk.Family, r.Cands[sel].Node, r.Cands[c].Node, sc.tgt, targeted, sc.now, cut, false)
			}
			q, pairProgress = Pair, pr.reporters
			// Only business evidence of this scope settles a pair: the
			// exact target's own pair, or common targets for an aggregate
			// read; configured probes never do.
			if pr.m[cmpResponse].known && !pr.partial && pr.basis == scopeBasis(targeted) {
				if !all {
					continue // nothing open
				}
				q = NoQuestion
			}
		}
		ch := Challenger{Node: r.Cands[c].Node, Question: q, Target: r.Target, Trained: v.Support >= 1,
			Completions: int(v.Support), idx: c, ntgt: &sc.tgt}
		switch q {
		case Qualification:
			ch.Progress = int(v.Exact.Successes)
		case Pair:
			ch.Progress = pairProgress
		}
		if ls != nil {
			ch.Unfinished = int(ls.unfinished[ni].Load())
			ch.inc, ch.member, ch.known = ls.inc, true, true
		}
		ch.ProbeRank = probeRank(sc, c)
		sc.ch = append(sc.ch, ch)
	}
}

// scopeBasis is the pair basis that settles a pair question of a
// targeted (the exact target) or an aggregate (common targets) read.
func scopeBasis(targeted bool) pairBasis {
	if targeted {
		return basisExact
	}
	return basisCommon
}

// usableIn reports a row's recent usability in the rank's own scope: the
// exact cell for a targeted rank, the family aggregate otherwise.
func usableIn(v *rankView, targeted bool) bool {
	if targeted {
		return v.Exact.Usable
	}
	return v.Family.Usable
}

// probeRank is row c's configured-probe order among the evaluated
// members: the number of them with a lower valid probe RTT (unknown
// last). sc.probes holds the evaluated members' valid RTTs, sorted
// (sortProbes).
func probeRank(sc *rankScratch, c int) int {
	pc := sc.views[c].Probe
	if !pc.Valid {
		// Every valid one but its own (it has none) ranks before it.
		return len(sc.probes)
	}
	lower, _ := slices.BinarySearch(sc.probes, int64(pc.RTT))
	return lower
}

// sortProbes fills sc.probes for probeRank.
func (sc *rankScratch) sortProbes() {
	sc.probes = sc.probes[:0]
	for _, i := range sc.rows {
		if !sc.in[i] {
			continue
		}
		if p := &sc.views[i].Probe; p.Valid {
			sc.probes = append(sc.probes, int64(p.RTT))
		}
	}
	slices.Sort(sc.probes)
}
