package score

import (
	"cmp"
	"errors"
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

	// Wait is Preview's answer for the member (see Preview).
	Wait error

	// Filled by Walk, unless known: the Engine's configuration already
	// holds the member's incarnation (the budget's, from one Configure).
	known   bool
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
	b.order(w, k, cands)
	blocked, first := false, true
	for i := range cands {
		c := &cands[i]
		if !c.dispatchable(sel) {
			continue
		}
		tk, tgt, err := c.trialKey()
		if err != nil {
			continue
		}
		r, err := b.reserveIn(w, k, tk, tgt, c.inc, sel.Usable, now, blocked)
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

// order fills every candidate's member state from w and sorts cands into
// dispatch order (see Walk). It changes nothing in w.
func (b *Budget) order(w *wallet, k BudgetKey, cands []Challenger) {
	for i := range cands {
		c := &cands[i]
		if !c.known {
			c.inc, c.member = b.members[member{k.Group, c.Node}]
		}
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
}

// dispatchable is the walk's rule: a configured member with an open
// question, and except for recovery only while its completions plus its
// unfinished work (its trials included) stay below the selection's.
func (c *Challenger) dispatchable(sel Selection) bool {
	return c.member && c.Question != NoQuestion && (c.Question == Recovery || c.Completions+c.Unfinished+c.open < sel.Completions)
}

// trialKey is the unanswered-trial identity c's question would take,
// and its normalized business target.
func (c *Challenger) trialKey() (trialKey, target, error) {
	if c.ntgt != nil {
		tk := trialKey{node: c.Node, q: c.Question}
		if c.Question != Qualification {
			tk.tgt = *c.ntgt
		}
		return tk, *c.ntgt, nil
	}
	return trialKeyOf(Trial{Node: c.Node, Question: c.Question, Target: c.Target})
}

// errComparable is a readonly wait: the member is not dispatched until
// the selection has more completions than its completions plus its
// unfinished work — the validation waits for comparable traffic on the
// selection.
var errComparable = errors.New("score: waiting for comparable traffic")

// Preview is the readonly dispatch walk of Explain: the same order and
// ledger rules as Walk, reading scope k without creating, expiring,
// refreshing or spending anything (a scope not yet retained reads as a
// fresh one). It reorders cands into dispatch order and fills each
// one's current wait (Challenger.Wait: nil, the ledger's budget, pause,
// in-flight or backoff refusal, errComparable for a member the walk
// would not dispatch, a budget refusal also for those behind one), and
// returns the index of the member the next original business would
// validate — the walk with that original's own earned 1/q — or -1.
// With anyTarget (an aggregate read) a member's unanswered trial of the
// same question on any target reads in flight.
func (b *Budget) Preview(k BudgetKey, sel Selection, cands []Challenger, anyTarget bool) (next int) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.scopes[k]
	if w == nil {
		n, ok := b.sizes[k.Group]
		if !ok {
			for i := range cands {
				cands[i].Wait = ErrNotMember
			}
			return -1
		}
		w = newWallet(n) // never stored
	}
	b.order(w, k, cands)
	// Expiry as Walk would sweep it: only live trials count.
	reserved, open := w.live(now)
	for i := range cands {
		c := &cands[i]
		c.open = 0
		for tk, tr := range w.trials {
			if tk.node == c.Node && tr.inc == c.inc && now < tr.deadline {
				c.open++
			}
		}
	}
	admit := func(w *wallet, c *Challenger) error {
		tk, tgt, err := c.trialKey()
		if err != nil {
			return err
		}
		tk.inc = c.inc
		if anyTarget && tk.q != Qualification {
			for t, tr := range w.trials {
				if t.node == tk.node && t.q == tk.q && tr.inc == c.inc && now < tr.deadline {
					return ErrInFlight
				}
			}
		}
		return w.admit(tk, tgt, c.inc, sel.Usable, now, reserved, open)
	}
	blocked := error(nil)
	for i := range cands {
		c := &cands[i]
		switch {
		case !c.member:
			c.Wait = ErrNotMember
		case c.Question == NoQuestion:
			c.Wait = nil
		case !c.dispatchable(sel):
			c.Wait = errComparable
		default:
			c.Wait = admit(w, c)
			if c.Wait == nil && blocked != nil {
				c.Wait = blocked
			}
			if blocked == nil && BudgetWait(c.Wait) {
				blocked = c.Wait
			}
		}
	}
	// The next original business earns its 1/q before its walk.
	nw := *w
	busy := false
	if d := b.business[groupNet{k.Group, k.Network}]; d != nil {
		busy = d.d.value(now, BusinessHalfLife)+1 >= busyThreshold
	}
	nw.earn(now, busy)
	for i := range cands {
		c := &cands[i]
		if !c.dispatchable(sel) {
			continue
		}
		switch err := admit(&nw, c); {
		case err == nil:
			return i
		case BudgetWait(err):
			return -1
		}
	}
	return -1
}
