package score

import (
	"cmp"
	"slices"

	"switchyard/health"
	"switchyard/netx"
)

// Selection is what a dispatch walk needs of the ordinary selection.
type Selection struct {
	Usable      bool // observed usable: failed trials can pause the scope
	Completions int  // the selection's useful completions in this scope
}

// Challenger is one evaluated challenger of a targeted rank, with its open
// question and the evaluator's view of its evidence.
type Challenger struct {
	Node        health.NodeID
	Question    Question
	Target      netx.Addr
	Trained     bool // has qualification evidence in this scope
	Progress    int  // progress toward the open question (for a pair, reporters sharing live blocks)
	Completions int  // its useful completions
	Unfinished  int  // its unfinished non-trial work; its trials are the budget's own
	ProbeRank   int  // configured-probe order, lower first; breaks never-selected ties

	idx  int     // the Engine's candidate index
	ntgt *target // Target already normalized (the Engine's rank), or nil

	// Filled by Walk.
	member  bool   // configured
	inc     uint64 // its incarnation
	open    int    // its unanswered trials
	recency int64  // its latest begun trial
}

// WalkResult is the outcome of one dispatch walk.
type WalkResult struct {
	Reservation Reservation
	Admitted    int   // index of the admitted candidate in the reordered slice, or -1
	Wait        error // the first dispatchable candidate's refusal, nil when it was admitted
	// Affected candidates, counted once each.
	BudgetBlocked, InFlight, BackedOff int
}

// Walk is the single optional-work path of an authorized targeted rank in
// scope k. It reorders cands into dispatch order — untrained members
// first, then the most progress toward the open question, then the least
// recently begun, the probe rank breaking ties among never-selected
// members — and reserves one credit for the first member the ledger
// admits. Except for recovery, a member is dispatched only while its
// completions plus its unfinished work (its trials included) stay below
// the selection's. An in-flight or backed-off refusal tries the next
// member; a budget refusal (exhausted credit or a pause) ends the walk,
// and every later dispatchable candidate not in flight or backed off
// counts as budget-blocked too.
func (b *Budget) Walk(k BudgetKey, sel Selection, cands []Challenger) WalkResult {
	res := WalkResult{Admitted: -1}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.wallet(k)
	if w == nil {
		res.Wait = ErrNotMember
		return res
	}
	w.expire(now)
	for i := range cands {
		c := &cands[i]
		c.inc, c.member = b.members[member{k.Group, c.Node}]
		m := w.member(c.Node, c.inc)
		c.open, c.recency = m.open, m.lastBegun
	}
	slices.SortStableFunc(cands, func(x, y Challenger) int {
		if x.Trained != y.Trained {
			if !x.Trained {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(y.Progress, x.Progress); c != 0 {
			return c
		}
		lx, ly := x.recency, y.recency
		if c := cmp.Compare(lx, ly); c != 0 || lx != 0 {
			return c
		}
		return cmp.Compare(x.ProbeRank, y.ProbeRank)
	})
	blocked, first := false, true
	for i := range cands {
		c := &cands[i]
		if !c.member || c.Question != Recovery && c.Completions+c.Unfinished+c.open >= sel.Completions {
			continue
		}
		var tk trialKey
		var err error
		if c.ntgt != nil {
			tk = trialKey{node: c.Node, q: c.Question}
			if c.Question != Qualification {
				tk.tgt = *c.ntgt
			}
		} else if tk, err = trialKeyOf(Trial{Node: c.Node, Question: c.Question, Target: c.Target}); err != nil {
			continue
		}
		r, err := b.reserveIn(w, k, tk, c.inc, sel.Usable, now, blocked)
		if first {
			res.Wait, first = err, false
		}
		switch {
		case err == nil && !blocked:
			res.Reservation, res.Admitted = r, i
			return res
		case err == ErrInFlight:
			res.InFlight++
		case err == ErrBackedOff:
			res.BackedOff++
		case BudgetWait(err):
			res.BudgetBlocked++
			blocked = true
		case err == nil: // dry run behind a budget refusal
			res.BudgetBlocked++
		}
	}
	return res
}
