package score

// # Trial budget
//
// A Budget funds optional trials (validation work sent to a challenger
// rather than to the ordinary winner) from original business, per
// retained (group, TCP/UDP, target family) scope. Pure logic: one mutex,
// no goroutine, no timer, no I/O; every method reads the injected Clock.
//
//	b := score.NewBudget(clock, members)
//	b.Earn(scopes...)                       // one original business start, every scope its plan traversed
//	res := b.Walk(scope, selection, cands)  // the single optional-work path; or Reserve for one trial
//	b.Begin(res.Reservation)                // node-specific work starts: spent
//	b.Release(r) | b.Settle(r, outcome)     // refund if unbegun | answer a begun trial
//	b.Failed(scope, node); b.TargetFailed(scope, node, target)   // real failures outside trials
//	b.Recovered(scope, node, target)        // genuine scoped RX opened recovery
//	b.Wait(scope, usable, trial); b.Ledger(scope); b.Demand(group, network)   // read-only
//	b.Reload(members)
//
// A scope freezes, when it is first used, its group's configured member
// count n and its cold allowance B: all members while n ≤ 4, otherwise
// ⌈√n⌉ + 1. Each original business start (Earn) adds 1/q to its earned
// currency E, with q = 16, or q = 8 while the group is busy on that
// network and the scope's trials pay off (below). Spent trials V and
// outstanding reservations R always obey V + R ≤ B + ⌊E⌋; unspent earned
// credit, E − max(0, V − B), is capped at 8, so a quiet stretch cannot
// bank an unbounded burst. E is kept in sixteenths, exactly. An original
// assigned to a trial still earns; its retries, clones, redirects and
// replacements keep its identity and never call Earn again.
//
// Measured on a loaded 2-core machine (BenchmarkEarn, BenchmarkReserve*,
// BenchmarkWalk): Earn 0.2–0.3 µs, Reserve and Release about 1 µs (one
// allocation, the normalized target; none for qualification), a walk
// over 50 candidates 3–5 µs without allocation.
//
// Values the spec names without a number, chosen here:
//
//   - "Recent original business implies at least two flows per second":
//     original starts decay with a five-minute half-life h; a steady rate
//     r converges to r·h/ln 2, so the group is busy while that sum is at
//     least 2·h/ln 2 ≈ 866 (BusyRate).
//   - "At least three recent optional-trial outcomes": trial outcomes
//     decay with a ten-minute half-life; their weight must exceed 2.5
//     (BusyTrials) with at least 80 % successes (BusyYield) for q = 8.
//   - The pause: a scope "has recent outcomes" while their decayed weight
//     is at least 0.5 (one outcome, one half-life old); its success share
//     below 20 % (PauseYield) pauses trials while the ordinary selection
//     is observed usable. "Two or more recent failures" is a decayed
//     failure weight of at least 1.5 (the count rounded): the scope then
//     refuses every trial until they decay; with less, trials go out one
//     at a time (refused while any trial of the scope is unanswered).
//     Recovery trials and scopes without a usable selection are not
//     paused. A paused refusal is a budget wait (ErrPaused).
//   - Reservations not begun within ReserveTTL (30 s: more than the
//     establishment deadline of max(10 s, 4 × connect timeout) with the
//     default connect timeout) expire and are refunded; begun trials not
//     settled within TrialTTL (ten minutes, the outcome half-life) stop
//     counting as in flight, without refund and without an outcome.
//   - One scope holds at most TrialsInFlight (64) unanswered trials; a
//     full table refuses like exhausted credit.
//   - The backoff after a real failure is 5 minutes, doubling with each
//     consecutive real failure, capped at 6 hours (5, 10, 20, 40, 80,
//     160, 320 min, then 360). It follows the failure's provenance: a
//     node-scoped failure (a TrialFailed trial, Failed) backs off the
//     member for every trial in the scope; a target-scoped one (a
//     TrialTargetFailed trial, TargetFailed) backs off only the member's
//     trials on that business target, whatever their question, its
//     consecutive failures counted per (member, target): a node that
//     blackholes one site is still tried on the sites it serves, as the
//     spec opens hard failure state for a target-path failure only in
//     the exact target. Both still count as failed trial outcomes in the
//     yield window. A target refusal (TrialRefused) backs off nothing. A
//     trial success ends the member's backoff and that target's; genuine
//     scoped RX opening recovery (Recovered) ends the member's and the
//     flow's target's.
//   - The (member, target) backoffs are a table of at most
//     TargetBackoffs (64) entries per scope. A full table makes room by
//     dropping an entry whose backoff already ended (only its streak is
//     lost), else the one ending soonest: the least recently failed
//     among equal streaks, and the least protection lost. 64 covers a
//     node failing dozens of distinct sites in one scope at once; an
//     evicted pair is tried again and, failing, backed off afresh. With
//     BudgetScopes scopes the tables' worst case is 262,144 entries.
//   - Bounds: BudgetScopes (4,096, the evidence tables' bound) scopes and
//     as many (group, network) demand entries; scopes exist only for
//     configured groups, and a full table drops the least recently used.
//     Member state lives only for configured members of the scope's group.
//
// Membership: Reload keeps every retained scope's n, B, E, V and demand,
// the backoffs (the member's and its per-target ones) of members still
// configured at the same incarnation, forgets its trial outcomes (the
// yield window) and the backoffs of members that left, refunds unbegun
// reservations of members that left (or changed incarnation) and keeps
// begun trials in flight until they settle or expire. A trial settling
// after a reload always counts in the historical counters, but moves the
// yield window and the backoff only while its (group, node) membership,
// at the same incarnation, is still configured: a removed member cannot
// pause or accelerate its replacement's funding. Deleting a group drops
// its scopes.

import (
	"errors"
	"math"
	"sync"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// Trial budget constants; see the section above.
const (
	BudgetScopes     = 4096
	ColdAll          = 4 // groups up to this many members may try them all cold
	CreditCap        = 8
	QuietShare       = 16 // q: originals per earned trial
	BusyShare        = 8
	BusinessHalfLife = 5 * time.Minute
	TrialHalfLife    = 10 * time.Minute
	BusyRate         = 2.0 // original flows per second
	BusyTrials       = 2.5
	BusyYield        = 0.8
	PauseYield       = 0.2
	BackoffBase      = 5 * time.Minute
	BackoffMax       = 6 * time.Hour
	ReserveTTL       = 30 * time.Second
	TrialTTL         = 10 * time.Minute
	TrialsInFlight   = 64
	TargetBackoffs   = 64 // (member, target) backoffs per scope
)

// Refusals of Reserve and Begin.
var (
	ErrNoCredit        = errors.New("score: trial budget exhausted")
	ErrPaused          = errors.New("score: trials paused after failed trials")
	ErrInFlight        = errors.New("score: member has an unanswered trial for this question")
	ErrBackedOff       = errors.New("score: member backed off after a real failure")
	ErrReservationGone = errors.New("score: reservation released, expired or settled")
)

// BudgetWait reports whether err is a budget refusal (exhausted credit or
// a pause), which ends a dispatch walk.
func BudgetWait(err error) bool { return err == ErrNoCredit || err == ErrPaused }

// BudgetKey names one budget scope: a Score group, a network and the
// target family.
type BudgetKey struct {
	Group   GroupID
	Network netx.Network
	Family  netx.Family
}

// Question is the open question a trial asks of a member.
type Question uint8

const (
	Qualification Question = iota // counts across targets
	Recovery                      // after a failure streak; never paused
	Availability                  // available without recent usability
	Pair                          // paired response evidence with the selection
	NoQuestion                    // nothing open (a readonly view's answer; never funded)
)

var questionNames = [...]string{Qualification: "qualification", Recovery: "recovery", Availability: "availability", Pair: "pair", NoQuestion: "none"}

// String is the question's readonly name: recovery, availability, pair,
// qualification or none.
func (q Question) String() string {
	if int(q) < len(questionNames) {
		return questionNames[q]
	}
	return "unknown"
}

// Trial is what Reserve is asked to fund: a member, its open question and
// the business target (ignored for Qualification).
type Trial struct {
	Node     health.NodeID
	Question Question
	Target   netx.Addr
}

// TrialOutcome is how a begun trial ended.
type TrialOutcome uint8

const (
	TrialSucceeded    TrialOutcome = iota + 1
	TrialFailed                    // a real node-scoped failure: yield and the member's backoff
	TrialRefused                   // a target refusal: not a trial outcome here
	TrialInconclusive              // missing traffic or neutral cancellation
	TrialTargetFailed              // a real target-scoped failure: yield and the (member, target) backoff
)

// Reservation is one funded, not yet settled trial. The zero Reservation
// is invalid.
type Reservation struct {
	key BudgetKey
	tk  trialKey
	tgt target // the business target (a qualification trial's too)
	id  uint64
}

// trialKey is one unanswered trial's identity: a member at its
// incarnation (a new incarnation is a new node), its question and, but
// for qualification, the target.
type trialKey struct {
	node health.NodeID
	inc  uint64
	q    Question
	tgt  target
}

type trial struct {
	id       uint64
	inc      uint64
	begun    bool
	deadline int64
}

type groupNet struct {
	group GroupID
	net   netx.Network
}

// decayed is a weight halving every half-life, stored as of at.
type decayed struct {
	v  float64
	at int64
}

func (d decayed) value(now int64, hl time.Duration) float64 {
	if d.v == 0 || now <= d.at {
		return d.v
	}
	return d.v * math.Exp2(-float64(now-d.at)/float64(hl))
}

func (d *decayed) add(now int64, hl time.Duration, w float64) {
	d.v = d.value(now, hl) + w
	d.at = max(d.at, now)
}

type demand struct {
	d    decayed
	used int64
}

// Budget holds the trial budgets of every Score group of one process.
// Every method is safe for concurrent use.
type Budget struct {
	clock Clock

	mu       sync.Mutex
	members  map[member]uint64 // → incarnation
	sizes    map[GroupID]int   // configured members per group
	scopes   map[BudgetKey]*wallet
	business map[groupNet]*demand
	seq      uint64
	tick     int64 // LRU stamps
}

// NewBudget returns the budgets of members' groups; a nil clock is the
// wall clock.
func NewBudget(clock Clock, members []Member) *Budget {
	if clock == nil {
		clock = wallClock{}
	}
	b := &Budget{clock: clock, scopes: make(map[BudgetKey]*wallet), business: make(map[groupNet]*demand)}
	b.setMembers(members)
	return b
}

func (b *Budget) setMembers(ms []Member) {
	b.members = membersOf(ms)
	b.sizes = make(map[GroupID]int)
	for m := range b.members {
		b.sizes[m.group]++
	}
}

func (b *Budget) now() int64 { return b.clock.Now().UnixNano() }

// ColdAllowance is B for a scope of n members: all of them up to four,
// otherwise ⌈√n⌉ + 1.
func ColdAllowance(n int) int {
	if n <= ColdAll {
		return max(n, 0)
	}
	return int(math.Ceil(math.Sqrt(float64(n)))) + 1
}

// wallet returns k's scope, created for a configured group; nil otherwise.
func (b *Budget) wallet(k BudgetKey) *wallet {
	b.tick++
	if w := b.scopes[k]; w != nil {
		w.used = b.tick
		return w
	}
	n, ok := b.sizes[k.Group]
	if !ok {
		return nil
	}
	if len(b.scopes) >= BudgetScopes {
		var oldest BudgetKey
		least := int64(math.MaxInt64)
		for key, w := range b.scopes {
			if w.used < least {
				oldest, least = key, w.used
			}
		}
		delete(b.scopes, oldest)
	}
	w := newWallet(n)
	w.used = b.tick
	b.scopes[k] = w
	return w
}

// demandOf returns the (group, network) demand entry, created if absent.
func (b *Budget) demandOf(k groupNet) *demand {
	if d := b.business[k]; d != nil {
		d.used = b.tick
		return d
	}
	if len(b.business) >= BudgetScopes {
		var oldest groupNet
		least := int64(math.MaxInt64)
		for key, d := range b.business {
			if d.used < least {
				oldest, least = key, d.used
			}
		}
		delete(b.business, oldest)
	}
	d := &demand{used: b.tick}
	b.business[k] = d
	return d
}

// busyThreshold is the decayed original count a steady BusyRate reaches.
var busyThreshold = BusyRate * BusinessHalfLife.Seconds() / math.Ln2

// Earn counts one original business start in every scope its plan
// traversed. Each distinct scope earns once, and each distinct (group,
// network) counts the start once in its demand, however often the nested
// path repeats it. Retries, clones, redirects and continuations of the
// same business must not call it again; reads, time and new targets
// never mint currency.
func (b *Budget) Earn(keys ...BudgetKey) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	var dsBuf [4]*demand // the demand entry counted for each key (nil: counted earlier or none)
	ds := dsBuf[:0]
	for i, k := range keys {
		var d *demand
		if _, ok := b.sizes[k.Group]; ok && !seenNet(keys[:i], k) {
			b.tick++
			d = b.demandOf(groupNet{k.Group, k.Network})
			d.d.add(now, BusinessHalfLife, 1)
		}
		ds = append(ds, d)
	}
	for i, k := range keys {
		if seenKey(keys[:i], k) {
			continue
		}
		w := b.wallet(k)
		if w == nil {
			continue
		}
		busy := false
		d := ds[i]
		if d == nil {
			d = b.business[groupNet{k.Group, k.Network}]
		}
		if d != nil {
			busy = d.d.value(now, BusinessHalfLife) >= busyThreshold
		}
		w.earn(now, busy)
	}
}

func seenNet(ks []BudgetKey, k BudgetKey) bool {
	for _, x := range ks {
		if x.Group == k.Group && x.Network == k.Network {
			return true
		}
	}
	return false
}

func seenKey(ks []BudgetKey, k BudgetKey) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// Reserve funds one trial of t.Node for t.Question in scope k, spent only
// at Begin. usable tells whether the ordinary selection is observed
// usable (only then can failed trials pause the scope). It refuses a
// non-member (ErrNotMember), a bad target (ErrBadTarget), a second
// unanswered trial of the member for the question and target
// (ErrInFlight), a backed-off member (ErrBackedOff), a paused scope
// (ErrPaused) and a trial the inequality V + R ≤ B + ⌊E⌋ cannot fund
// (ErrNoCredit).
func (b *Budget) Reserve(k BudgetKey, usable bool, t Trial) (Reservation, error) {
	tk, tgt, err := trialKeyOf(t)
	if err != nil {
		return Reservation{}, err
	}
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reserveLocked(k, usable, tk, tgt, now, false)
}

// trialKeyOf returns t's unanswered-trial identity and its normalized
// business target (zero for targetless work; a qualification trial's
// target names only its target backoff, so a bad one is no error).
func trialKeyOf(t Trial) (trialKey, target, error) {
	tk := trialKey{node: t.Node, q: t.Question}
	tgt, _, err := normalizeTarget(t.Target)
	if t.Question == Qualification {
		if err != nil {
			tgt = target{}
		}
		return tk, tgt, nil
	}
	tk.tgt = tgt
	return tk, tgt, err
}

// reserveLocked admits tk on business target tgt in k; with dry it only
// classifies.
func (b *Budget) reserveLocked(k BudgetKey, usable bool, tk trialKey, tgt target, now int64, dry bool) (Reservation, error) {
	inc, ok := b.members[member{k.Group, tk.node}]
	if !ok {
		return Reservation{}, ErrNotMember
	}
	w := b.wallet(k)
	w.expire(now)
	return b.reserveIn(w, k, tk, tgt, inc, usable, now, dry)
}

// reserveIn admits tk on business target tgt of a member at incarnation
// inc in k's swept wallet w.
func (b *Budget) reserveIn(w *wallet, k BudgetKey, tk trialKey, tgt target, inc uint64, usable bool, now int64, dry bool) (Reservation, error) {
	tk.inc = inc
	if err := w.admit(tk, tgt, inc, usable, now, w.reserved, len(w.trials)); err != nil || dry {
		return Reservation{}, err
	}
	b.seq++
	w.reserve(tk, trial{id: b.seq, inc: inc, deadline: now + int64(ReserveTTL)})
	return Reservation{key: k, tk: tk, tgt: tgt, id: b.seq}, nil
}

// Begin spends r when node-specific work starts, and advances the
// member's dispatch recency. It refuses (and refunds) a reservation whose
// member left the configuration or changed incarnation (ErrNotMember),
// and refuses one that was released, expired, settled or already begun
// (ErrReservationGone).
func (b *Budget) Begin(r Reservation) error {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.scopes[r.key]
	if w == nil {
		return ErrReservationGone
	}
	w.expire(now)
	tr, ok := w.trials[r.tk]
	if !ok || tr.id != r.id || tr.begun {
		return ErrReservationGone
	}
	if inc, ok := b.members[member{r.key.Group, r.tk.node}]; !ok || inc != tr.inc {
		w.drop(r.tk, tr)
		return ErrNotMember
	}
	w.begin(r.tk, tr, now)
	return nil
}

// Release gives r up: an unbegun reservation is refunded; a begun trial
// is not (begun cancellation never refunds) and stays in flight until
// Settle or its expiry.
func (b *Budget) Release(r Reservation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.scopes[r.key]
	if w == nil {
		return
	}
	if tr, ok := w.trials[r.tk]; ok && tr.id == r.id && !tr.begun {
		w.drop(r.tk, tr)
	}
}

// Settle ends r with outcome o. An unbegun reservation is released
// (refunded) instead. A begun trial counts in the historical counters;
// while its member is still configured at the same incarnation it also
// feeds the scope's yield (successes and failures only) and the member's
// backoff (a failure extends the member's, or for a target-scoped one
// only the (member, target) backoff; a success ends both).
func (b *Budget) Settle(r Reservation, o TrialOutcome) {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.scopes[r.key]
	if w == nil {
		return
	}
	tr, ok := w.trials[r.tk]
	if !ok || tr.id != r.id {
		return
	}
	if !tr.begun {
		w.drop(r.tk, tr)
		return
	}
	w.drop(r.tk, tr)
	inc, ok := b.members[member{r.key.Group, r.tk.node}]
	w.settle(r.tk.node, r.tgt, o, ok && inc == tr.inc, inc, now)
}

// Reload commits a new configuration: see the section above.
func (b *Budget) Reload(members []Member) { b.reloadSized(members, nil) }

// reloadSized is Reload with each group's configured member count n
// (sizes) where it differs from its number of leaves (a group of
// subgroups).
func (b *Budget) reloadSized(members []Member, sizes map[GroupID]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setMembers(members)
	for g, n := range sizes {
		if _, ok := b.sizes[g]; ok && n > 0 {
			b.sizes[g] = n
		}
	}
	for k, w := range b.scopes {
		if _, ok := b.sizes[k.Group]; !ok {
			delete(b.scopes, k)
			continue
		}
		w.reload(k.Group, b.members)
	}
	for k := range b.business {
		if _, ok := b.sizes[k.group]; !ok {
			delete(b.business, k)
		}
	}
}

// Demand returns the group's decayed original business starts on network
// (five-minute half-life) at the clock's now: what the busy share reads,
// and the offered business a serving pool sizes from. A read is neutral.
func (b *Budget) Demand(group GroupID, network netx.Network) float64 {
	now := b.now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if d := b.business[groupNet{group, network}]; d != nil {
		return d.d.value(now, BusinessHalfLife)
	}
	return 0
}
