package score

// # The serving pool
//
// Each Score group owns one committed serving pool per network (Pool),
// shared by every parent route and target: ordinary first choice, failure
// escape, recovery, promotion and optional trials all select inside it.
// It is pure logic under one mutex: events and Applies carry their time,
// the injected Clock serves reads only, and nothing runs in the
// background. Pools holds them: one per configured group UUID and
// network, created on first use, dropped when the group leaves the
// configuration, reset (demand kept) by every reload.
//
// Demand. Demand(at) records one original business start (not a retry,
// a probe or warm-up). The starts decay with a five-minute half-life
// (DemandHalfLife) and are projected to the 30-minute evidence half-life
// (HalfLife): D = S·HalfLife/DemandHalfLife = 6·S, where S is the
// five-minute decayed count. At a steady rate r a decayed count holds
// r·h/ln 2, so 6·S is exactly what the 30-minute evidence would hold if
// the current rate went on: the pool follows a change of load within
// minutes, yet D is counted in the currency the evidence (and the trial
// budget) accrue in. Half of the optional starts earned at q = 16 fund
// four effective completions per challenger: D/2/16/4 = D/128.
//
// Size. PoolSize(D, n) for a view of n unique candidates is
//
//	k = clamp(1 + ⌊D/128⌋, 3, ceiling), never more than n
//	ceiling = min(25, ⌈√n⌉ + 1) when n > 4 (8 for 45), n otherwise
//
// so a view of four or fewer candidates serves only its own members. A
// view larger than k reserves one of the k slots for rotation: k−1 ranked
// slots and one rotation slot.
//
// Apply. Only Rerank, the authorized Apply's full resolution (never a
// retry's partial one), initializes or changes the pool. Bootstrap (the
// first Apply, or the first after a Reload) commits k from the decayed
// demand, ranks the candidates — eligible before ineligible, then higher
// utility, then lower probe RTT (unknown last), then declaration order —
// and fills the ranked slots, the ordinary first-choice winner
// (Candidate.Winner) always among them; the rotation slot takes the
// first other candidate in declaration order, eligible preferred. Later
// Applies do, in this order:
//
//   - withdraw a nested slot whose subgroup yielded no candidate, and
//     give a nested slot its subgroup's new representative in place;
//   - every five minutes (RerankEvery) from the latest rerank, rerank:
//     k grows to the demanded size (growth waits for this refresh) and
//     the ranked slots are refilled from the ranking;
//   - shrink at any Apply when the demanded size has fallen by two or
//     more below the committed k (ShrinkBy): a fall of one keeps k; a
//     view that lost candidates cuts k to its ceiling;
//   - replace early a member with three node-wide failures in a row
//     (NodeFailed, reset by NodeOK; ReplaceAfter) or an authoritative
//     health exclusion (Excluded), in its slot, with the best eligible
//     non-member — without a replacement the member stays, keeping its
//     access to funded recovery; capacity does not grow;
//   - refill capacity a withdrawal left empty with eligible non-members;
//   - a rotation member that is the Apply's ordinary winner trades places
//     with the lowest-ranked ranked member, which takes the rotation slot
//     with a fresh interval: membership is unchanged and expiry alone
//     never evicts the serving winner;
//   - advance the rotation slot once its member has held it for ten
//     minutes (RotateEvery) — exactly then, not before — to the next
//     non-member in declaration order after the previous one, eligible
//     preferred; that scan is one pass over the candidates.
//
// Direct members missing from an Apply's candidates stay (filtered or
// retry absence does not remove a shared member, and exact-target
// failures never reach the pool); only a nested subgroup's absence from
// a full resolution withdraws its slot, refilled by the best eligible
// non-member when there is one.
//
// A member marked for replacement stays marked until it is replaced or
// NodeOK reports a useful completion on it. An Apply with nothing due
// (no rerank, expiry, shrink, nested change, rotation winner, unfilled
// capacity, or marked member with an eligible replacement) is a scan of
// the candidates without allocation.
//
// Reads. Members is the committed membership. Peek is the readonly
// view: the committed membership, or before initialization a temporary
// projection of the bootstrap. Project runs the same Apply on a copy and
// commits nothing (no membership, capacity, rotation or generation): the
// prospective membership an internal preflight (the IPv4 preflight before
// an IPv6 final) derives through the same selection path.
//
// Identity. A direct slot is its node (health.NodeID); a nested slot is
// its immediate subgroup's name, not the subgroup's UUID and not its
// representative leaf, so a new representative replaces the old one in
// the same slot and a direct member's node is never mistaken for one.
//
// Plans. Plan(at, key) captures the ordinary-pool obligation of one
// policy-selected attempt: the slot and the pool generation, which moves
// with every committed membership change and every Reload. Begin(plan)
// rechecks it before node-specific I/O: an unchanged generation passes
// at once; otherwise the slot must still be a member of an initialized
// pool of the same reload epoch. Departure, an uninitialized pool and a
// reload refuse the attempt with a *CancelError, which is ErrStalePlan
// and context.Canceled under errors.Is: the caller cancels the attempt
// (no failure recorded) and refunds its unbegun reservations. A plan
// whose slot survived a membership change elsewhere still begins: only
// its own obligation counts. A retry keeps its business identity but
// plans again: it passes admission anew. Reload resets membership and
// capacity and keeps the decayed demand.
//
// Costs (BenchmarkPoolPlanBegin, BenchmarkPoolApplyQuiet,
// BenchmarkPoolRerank; shared, loaded 2-core amd64): Plan and Begin
// together 45–85 ns and no allocation; a quiet Apply of 50 candidates
// 130–175 ns and no allocation; a rerank of 50 about 15 µs and 10
// allocations, once per five minutes or membership change.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// Serving pool constants.
const (
	DemandHalfLife = 5 * time.Minute  // half-life of original starts
	DemandPerSlot  = 128              // projected demand per challenger slot
	MinPool        = 3                // the smallest demanded pool
	MaxPool        = 25               // the largest ceiling
	RotateEvery    = 10 * time.Minute // a rotation member's interval
	RerankEvery    = 5 * time.Minute  // periodic reranking
	ShrinkBy       = 2                // demand-driven shrinkage needs k to fall by this much
	ReplaceAfter   = 3                // node-wide failures in a row that replace a member early
)

// ErrStalePlan is the refusal of a plan whose pool obligation no longer
// holds; every *CancelError is ErrStalePlan.
var ErrStalePlan = errors.New("score: stale serving-pool plan")

// ErrNotInPool is Plan's refusal of a key that is not a committed member.
var ErrNotInPool = errors.New("score: not a serving-pool member")

// CancelReason says why Begin refused a plan.
type CancelReason uint8

const (
	// Uninitialized: the pool has no committed membership (never applied,
	// or reset by a Reload since the plan).
	Uninitialized CancelReason = iota + 1
	// Departed: the plan's slot left the committed membership.
	Departed
)

func (r CancelReason) String() string {
	switch r {
	case Uninitialized:
		return "uninitialized"
	case Departed:
		return "departed"
	}
	return "unknown"
}

// CancelError is Begin's typed cancellation of a stale plan. It is
// ErrStalePlan and context.Canceled under errors.Is: the attempt is
// cancelled, not failed, and its unbegun reservations are refunded.
type CancelError struct{ Reason CancelReason }

func (e *CancelError) Error() string {
	return fmt.Sprintf("score: serving-pool plan cancelled: %v", e.Reason)
}

// Is matches ErrStalePlan and context.Canceled.
func (e *CancelError) Is(target error) bool {
	return target == ErrStalePlan || target == context.Canceled
}

// Key names a pool slot: a nested slot by its immediate subgroup's name,
// a direct member by its node.
type Key struct {
	Subgroup string        // the immediate subgroup's name; "" for a direct member
	Node     health.NodeID // a direct member's node; ignored for a nested slot
}

// DirectKey is the key of a direct member.
func DirectKey(n health.NodeID) Key { return Key{Node: n} }

// NestedKey is the key of a nested slot.
func NestedKey(subgroup string) Key { return Key{Subgroup: subgroup} }

func (k Key) norm() Key {
	if k.Subgroup != "" {
		k.Node = health.NodeID{}
	}
	return k
}

// Candidate is one row of an Apply's view: a direct member, or a nested
// subgroup's current representative.
type Candidate struct {
	Node     health.NodeID // the leaf: the member, or the subgroup's representative
	Subgroup string        // the immediate subgroup's name; "" for a direct member
	// Eligible is ordinary eligibility (health, failure state).
	Eligible bool
	// Utility is the ranking's serving-pool-relative utility; higher wins.
	Utility float64
	// ProbeRTT breaks utility ties, lower first; zero is unknown (last).
	ProbeRTT time.Duration
	// Winner marks this Apply's ordinary first-choice winner.
	Winner bool
}

// Key is the candidate's slot key.
func (c Candidate) Key() Key { return Key{Subgroup: c.Subgroup, Node: c.Node}.norm() }

// Slot is one committed member.
type Slot struct {
	Key
	Node     health.NodeID // the leaf: the member or the representative
	Rotation bool          // the rotation slot
	Since    time.Time     // when the member took its slot (the rotation interval's start)
}

// Plan is one policy-selected attempt's captured pool obligation.
type Plan struct {
	pool  *Pool
	key   Key
	gen   uint64
	epoch uint64
	At    time.Time // when the plan was made
}

type slot struct {
	key      Key
	node     health.NodeID
	rotation bool
	since    int64 // the slot's role (a rotation interval) began
	joined   int64 // the leaf entered the pool
	fails    int   // node-wide failures in a row
	replace  bool  // marked for early replacement
}

// Pool is one Score group's committed serving pool on one network.
type Pool struct {
	Group   GroupID
	Network netx.Network
	clock   Clock

	mu         sync.Mutex
	init       bool
	gen        uint64 // committed membership generation
	epoch      uint64 // reload epoch
	k          int
	slots      []slot // ranked first, the rotation slot (if any) last
	lastRerank int64
	cursor     int // declaration index of the latest rotation member
	demand     float64
	demandAt   int64
}

// NewPool returns group's uninitialized pool on network; a nil clock is
// the wall clock.
func NewPool(clock Clock, group GroupID, network netx.Network) *Pool {
	if clock == nil {
		clock = wallClock{}
	}
	return &Pool{Group: group, Network: network, clock: clock, cursor: -1}
}

// PoolSize is the committed size for projected demand d and a view of n
// unique candidates.
func PoolSize(d float64, n int) int {
	if n <= 0 {
		return 0
	}
	ceiling := n
	if n > 4 {
		ceiling = min(MaxPool, int(math.Ceil(math.Sqrt(float64(n))))+1)
	}
	k := MinPool
	switch {
	case d >= DemandPerSlot*MaxPool: // +Inf too; NaN stays at the minimum
		k = MaxPool
	case d > 0:
		k = max(k, 1+int(d/DemandPerSlot))
	}
	return min(k, ceiling, n)
}

func demandFactor(d int64) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp2(-float64(d) / float64(DemandHalfLife))
}

// Demand records one original business start at at.
func (p *Pool) Demand(at time.Time) {
	t := at.UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.demandAt == 0:
		p.demandAt = t
		p.demand = 1
	case t >= p.demandAt:
		p.demand = p.demand*demandFactor(t-p.demandAt) + 1
		p.demandAt = t
	default:
		p.demand += demandFactor(p.demandAt - t)
	}
}

func (p *Pool) projectedLocked(t int64) float64 {
	return p.demand * demandFactor(t-p.demandAt) * float64(HalfLife/DemandHalfLife)
}

// Projected is the projected demand D at the clock's now.
func (p *Pool) Projected() float64 {
	t := p.clock.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.projectedLocked(t)
}

// Capacity is the committed k (0 before initialization).
func (p *Pool) Capacity() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.k
}

// Initialized reports whether an Apply committed the pool since the
// latest Reload.
func (p *Pool) Initialized() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.init
}

// Members returns the committed members, ranked first and the rotation
// slot last; nil before initialization.
func (p *Pool) Members() []Slot {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.members()
}

func (p *Pool) members() []Slot {
	if !p.init {
		return nil
	}
	out := make([]Slot, len(p.slots))
	for i, s := range p.slots {
		out[i] = Slot{Key: s.key, Node: s.node, Rotation: s.rotation, Since: time.Unix(0, s.since)}
	}
	return out
}

func (p *Pool) find(k Key) int {
	for i := range p.slots {
		if p.slots[i].key == k {
			return i
		}
	}
	return -1
}

// Contains reports whether k is a committed member.
func (p *Pool) Contains(k Key) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.init && p.find(k.norm()) >= 0
}

// NodeFailed records a node-wide failure of node at event time at: every
// member whose leaf is node and that joined the pool at or before at
// counts it (a late report from an earlier tenure does not), and the
// ReplaceAfter-th in a row marks the member for early replacement at the
// next Apply. Target-scoped failures are not node-wide and never come
// here.
func (p *Pool) NodeFailed(node health.NodeID, at time.Time) {
	t := at.UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.slots {
		s := &p.slots[i]
		if s.node == node && t >= s.joined {
			s.fails++
			if s.fails >= ReplaceAfter {
				s.replace = true
			}
		}
	}
}

// NodeOK records a useful completion on node: the failure run of every
// member whose leaf is node restarts.
func (p *Pool) NodeOK(node health.NodeID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.slots {
		if s := &p.slots[i]; s.node == node {
			s.fails = 0
			s.replace = false
		}
	}
}

// Excluded records an authoritative health exclusion of node: every
// member whose leaf is node is replaced at the next Apply when an
// eligible replacement exists.
func (p *Pool) Excluded(node health.NodeID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.slots {
		if s := &p.slots[i]; s.node == node {
			s.replace = true
		}
	}
}

// Reload resets membership and capacity, keeping the decayed demand:
// the next Apply bootstraps again, and every earlier plan is refused.
func (p *Pool) Reload() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init = false
	p.slots = p.slots[:0]
	p.k = 0
	p.lastRerank = 0
	p.cursor = -1
	p.gen++
	p.epoch++
}

// Plan captures the pool obligation of an attempt on slot k at at. It
// refuses an uninitialized pool (a *CancelError) and a key that is not a
// member (ErrNotInPool).
func (p *Pool) Plan(at time.Time, k Key) (Plan, error) {
	k = k.norm()
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.init {
		return Plan{}, &CancelError{Reason: Uninitialized}
	}
	if p.find(k) < 0 {
		return Plan{}, ErrNotInPool
	}
	return Plan{pool: p, key: k, gen: p.gen, epoch: p.epoch, At: at}, nil
}

// Begin rechecks pl's obligation before node-specific I/O: nil when the
// plan still holds, else a *CancelError.
func (p *Pool) Begin(pl Plan) error {
	if pl.pool != p {
		return &CancelError{Reason: Uninitialized}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.init || pl.epoch != p.epoch {
		return &CancelError{Reason: Uninitialized}
	}
	if pl.gen == p.gen {
		return nil
	}
	if p.find(pl.key) < 0 {
		return &CancelError{Reason: Departed}
	}
	return nil
}

// size is the committed capacity and membership count.
func (p *Pool) size() (capacity, members int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.init {
		return 0, 0
	}
	return p.k, len(p.slots)
}

// mark sets in[i] for every cand that is a committed member and reports
// whether the pool is initialized: one lock for a whole rank. A 64-bit
// filter of the direct members' nodes skips most non-members without
// scanning the slots.
func (p *Pool) mark(cands []Candidate, in []bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var filter uint64
	nested := false
	for j := range p.slots {
		if p.slots[j].key.Subgroup != "" {
			nested = true
			continue
		}
		filter |= nodeBit(p.slots[j].key.Node)
	}
	for i := range cands {
		in[i] = false
		if !p.init {
			continue
		}
		c := &cands[i]
		if c.Subgroup == "" && filter&nodeBit(c.Node) == 0 {
			continue
		}
		if c.Subgroup != "" && !nested {
			continue
		}
		for j := range p.slots {
			k := &p.slots[j].key
			if k.Subgroup == c.Subgroup && (c.Subgroup != "" || k.Node == c.Node) {
				in[i] = true
				break
			}
		}
	}
	return p.init
}

// nodeBit is node's bit in a 64-bit membership filter.
func nodeBit(n health.NodeID) uint64 {
	h := binary.LittleEndian.Uint64(n[:8]) ^ binary.LittleEndian.Uint64(n[8:])
	return 1 << ((h * 0x9e3779b97f4a7c15) >> 58)
}

// admits reports, under one lock, whether the pool is initialized and
// whether a committed member's leaf is node.
func (p *Pool) admits(node health.NodeID) (init, member bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := range p.slots {
		if p.slots[i].node == node {
			return p.init, p.init
		}
	}
	return p.init, false
}
