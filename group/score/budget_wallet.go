package score

import (
	"switchyard/health"
)

// wallet is one budget scope's ledger. The Budget's mutex guards it.
type wallet struct {
	n, cold  int
	e16      int64 // earned currency E, in sixteenths
	spent    int64 // V
	reserved int64 // R
	succ     decayed
	fail     decayed // trial yield, TrialHalfLife, since the latest reload
	trials   map[trialKey]trial
	expiry   int64 // earliest trial deadline, or 0
	members  map[health.NodeID]memberState
	tback    map[memberTarget]targetBackoff // at most TargetBackoffs; nil until the first
	used     int64
	hist     TrialCounts
}

// memberState is one configured member's trial state in a scope.
type memberState struct {
	inc       uint64
	open      int   // unanswered trials
	streak    uint8 // consecutive real failures
	until     int64 // backoff end
	lastBegun int64 // dispatch recency; 0 = never selected
}

// TrialCounts are a scope's historical trial counters: observed trial
// work, kept across reloads.
type TrialCounts struct {
	Originals    int64 // original starts counted (N)
	Begun        int64
	Succeeded    int64
	Failed       int64
	Refused      int64 // target refusals
	Inconclusive int64
	Refunded     int64 // unbegun reservations released, invalidated or expired
	Expired      int64 // begun trials that never settled within TrialTTL
}

func newWallet(n int) *wallet {
	return &wallet{n: n, cold: ColdAllowance(n), trials: make(map[trialKey]trial), members: make(map[health.NodeID]memberState)}
}

// capacity is B + ⌊E⌋.
func (w *wallet) capacity() int64 { return int64(w.cold) + w.e16/16 }

// earn adds 1/q for one original start, within the credit cap.
func (w *wallet) earn(now int64, busy bool) {
	w.hist.Originals++
	q := int64(QuietShare)
	if busy && w.paysOff(now) {
		q = BusyShare
	}
	limit := (max(0, w.spent-int64(w.cold)) + CreditCap) * 16
	w.e16 = max(w.e16, min(w.e16+16/q, limit))
}

func (w *wallet) yield(now int64) (s, f float64) {
	return w.succ.value(now, TrialHalfLife), w.fail.value(now, TrialHalfLife)
}

// paysOff is the q = 8 trial condition: more than 2.5 recent outcomes, at
// least 80 % of them successes.
func (w *wallet) paysOff(now int64) bool {
	s, f := w.yield(now)
	return s+f > BusyTrials && s >= BusyYield*(s+f)
}

// member returns node's state, fresh when absent or of another
// incarnation.
func (w *wallet) member(node health.NodeID, inc uint64) memberState {
	m, ok := w.members[node]
	if !ok || m.inc != inc {
		return memberState{inc: inc}
	}
	return m
}

// admit checks tk on business target tgt against the in-flight rule,
// the member's and the (member, target) backoff, the pause and the
// inequality, with reserved unbegun reservations among open unanswered
// trials.
func (w *wallet) admit(tk trialKey, tgt target, inc uint64, usable bool, now, reserved int64, open int) error {
	if tr, ok := w.trials[tk]; ok && now < tr.deadline {
		return ErrInFlight
	}
	if m := w.member(tk.node, inc); now < m.until || w.targetBackedOff(tk.node, tgt, inc, now) {
		return ErrBackedOff
	}
	if usable && tk.q != Recovery {
		s, f := w.yield(now)
		if s+f >= 0.5 && s < PauseYield*(s+f) && (f >= 1.5 || open > 0) {
			return ErrPaused
		}
	}
	if open >= TrialsInFlight || w.spent+reserved+1 > w.capacity() {
		return ErrNoCredit
	}
	return nil
}

func (w *wallet) reserve(tk trialKey, tr trial) {
	w.reserved++
	w.trials[tk] = tr
	if w.expiry == 0 || tr.deadline < w.expiry {
		w.expiry = tr.deadline
	}
	m := w.member(tk.node, tr.inc)
	m.open++
	w.members[tk.node] = m
}

// drop removes tk's trial, refunding it when unbegun.
func (w *wallet) drop(tk trialKey, tr trial) {
	delete(w.trials, tk)
	if !tr.begun {
		w.reserved--
		w.hist.Refunded++
	}
	if m, ok := w.members[tk.node]; ok && m.inc == tr.inc && m.open > 0 {
		m.open--
		w.members[tk.node] = m
	}
}

func (w *wallet) begin(tk trialKey, tr trial, now int64) {
	w.reserved--
	w.spent++
	w.hist.Begun++
	tr.begun = true
	tr.deadline = now + int64(TrialTTL)
	w.trials[tk] = tr
	w.expiry = min(w.expiry, tr.deadline)
	m := w.member(tk.node, tr.inc)
	m.lastBegun = now
	w.members[tk.node] = m
}

// expire drops trials past their deadline: unbegun ones are refunded.
func (w *wallet) expire(now int64) {
	if w.expiry == 0 || now < w.expiry {
		return
	}
	w.expiry = 0
	for tk, tr := range w.trials {
		if now < tr.deadline {
			if w.expiry == 0 || tr.deadline < w.expiry {
				w.expiry = tr.deadline
			}
			continue
		}
		if tr.begun {
			w.hist.Expired++
		}
		w.drop(tk, tr)
	}
}

// settle records a begun trial's outcome on business target tgt; current
// tells whether its member is still configured at the trial's
// incarnation.
func (w *wallet) settle(node health.NodeID, tgt target, o TrialOutcome, current bool, inc uint64, now int64) {
	switch o {
	case TrialSucceeded:
		w.hist.Succeeded++
	case TrialFailed, TrialTargetFailed:
		w.hist.Failed++
	case TrialRefused:
		w.hist.Refused++
	default:
		w.hist.Inconclusive++
	}
	if !current {
		return
	}
	switch o {
	case TrialSucceeded:
		w.succ.add(now, TrialHalfLife, 1)
		w.recovered(node, tgt, inc)
	case TrialFailed:
		w.fail.add(now, TrialHalfLife, 1)
		w.backoff(node, inc, now)
	case TrialTargetFailed:
		w.fail.add(now, TrialHalfLife, 1)
		w.targetBackoff(node, tgt, inc, now)
	}
}

// reload forgets the yield, refunds unbegun reservations of departed
// members, keeps begun trials and prunes departed members' idle state.
func (w *wallet) reload(g GroupID, members map[member]uint64) {
	w.succ, w.fail = decayed{}, decayed{}
	for tk, tr := range w.trials {
		if inc, ok := members[member{g, tk.node}]; !tr.begun && (!ok || inc != tr.inc) {
			w.drop(tk, tr)
		}
	}
	for node, m := range w.members {
		// A departed member's state goes, unless begun trials still
		// count against it (they settle or expire; a later reload
		// prunes it).
		if inc, ok := members[member{g, node}]; (!ok || inc != m.inc) && m.open == 0 {
			delete(w.members, node)
		}
	}
	for mt, tb := range w.tback {
		if inc, ok := members[member{g, mt.node}]; !ok || inc != tb.inc {
			delete(w.tback, mt)
		}
	}
}

// Ledger is a read-only snapshot of one budget scope.
type Ledger struct {
	Members       int     // n, frozen when the scope was created
	ColdAllowance int     // B
	Earned        float64 // E
	Spent         int64   // V
	Reserved      int64   // R, unexpired unbegun reservations
	InFlight      int     // unanswered trials, begun or not
	Successes     float64 // decayed trial successes since the latest reload
	Failures      float64 // decayed trial failures since the latest reload
	Counts        TrialCounts
}

// Ledger reads scope k without creating it, spending, expiring or
// refreshing anything: derived values are those of the clock's now.
func (b *Budget) Ledger(k BudgetKey) (Ledger, bool) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.scopes[k]
	if w == nil {
		return Ledger{}, false
	}
	l := Ledger{Members: w.n, ColdAllowance: w.cold, Earned: float64(w.e16) / 16, Spent: w.spent, Counts: w.hist}
	l.Reserved, l.InFlight = w.live(now)
	l.Successes, l.Failures = w.yield(now)
	return l, true
}

// live counts the unexpired unbegun reservations and unanswered trials.
func (w *wallet) live(now int64) (reserved int64, open int) {
	for _, tr := range w.trials {
		if now >= tr.deadline {
			continue
		}
		open++
		if !tr.begun {
			reserved++
		}
	}
	return reserved, open
}

// Wait reads what Reserve would answer for t in scope k now — nil when
// it would fund the trial — without creating, expiring, spending or
// refreshing anything: the readonly wait of a view. A scope not yet
// created reads as a fresh one.
func (b *Budget) Wait(k BudgetKey, usable bool, t Trial) error {
	tk, tgt, err := trialKeyOf(t)
	if err != nil {
		return err
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	inc, ok := b.members[member{k.Group, tk.node}]
	if !ok {
		return ErrNotMember
	}
	tk.inc = inc
	w := b.scopes[k]
	if w == nil {
		if ColdAllowance(b.sizes[k.Group]) > 0 {
			return nil
		}
		return ErrNoCredit
	}
	reserved, open := w.live(now)
	return w.admit(tk, tgt, inc, usable, now, reserved, open)
}
