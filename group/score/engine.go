package score

// # Engine: the contract the group manager and the data path use
//
// Engine is one process's whole Score state: the Scorer (evidence), the
// Pools (serving pools), the Budget (trial currency), the comparison
// store, the ranking and the reason counters. The group manager holds
// one Engine for the process lifetime and calls Configure at every
// reload; nothing else in switchyard touches the Scorer, Pools or Budget
// directly.
//
//	e := score.NewEngine(clock)
//	e.Configure(at, specs)                 // every reload (and at start)
//	d := e.Rank(at, &req)                  // one flow's (one packet's) selection in one Score group
//	f, err := d.Attempt.Begin(at)          // first physical or logical open; or d.Attempt.Release(at)
//	f.Setup / Response / Progress / Settle | Fail | Cancel
//	e.Probe(...)                           // a configured health probe result
//	e.NodeDown(node)                       // an authoritative health exclusion
//	e.Stats()                              // /switchyard/v1/stats/score, metrics
//	e.Explain(at, q)                       // readonly summary: relations, questions, waits
//
// Rank with Request.Peek is readonly: no Apply, no counter, no
// reservation, no Attempt (introspection, the Clash view's `now`).

import (
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// GroupSpec is one configured Score group at a Configure.
type GroupSpec struct {
	ID GroupID
	// Members is the group's configured member count (the budget's n).
	Members int
	// Leaves are every leaf node the group can select (direct members
	// and the leaves reachable through its subgroups), with their
	// incarnations.
	Leaves []Leaf
}

// Leaf is one selectable node of a group at its incarnation.
type Leaf struct {
	Node        health.NodeID
	Incarnation uint64
}

// Request is one selection in one Score group. The caller owns it and
// may reuse it (and Cands) from flow to flow.
type Request struct {
	Group   GroupID
	Network netx.Network
	// Family is the target family (the scoring bucket), not the health
	// family of the connection to the proxy server.
	Family netx.Family
	// Target is the flow's destination; the zero Addr for targetless
	// work.
	Target netx.Addr
	// Cands are the group's candidates after the liveness filter, in
	// declaration order: Node, Subgroup and Eligible set by the caller;
	// Utility and Winner are the engine's to fill.
	Cands []Candidate
	// Exclude is a failed node a sequential retry must not choose (zero:
	// none).
	Exclude health.NodeID
	// Retry marks a continuation of an original business (the one
	// sequential retry): it earns no currency and counts no demand.
	Retry bool
	// Peek is a readonly read.
	Peek bool
	// Preflight is the internal IPv4 preflight before an IPv6 final: a
	// readonly rank (like Peek) whose membership is the prospective one
	// the Apply would commit now (Pool.Project), not the committed one.
	Preflight bool
	// LastResort marks the sole-TCP-leaf last-resort selection: it
	// enters the pool and reports like any plan but counts no reason.
	LastResort bool
}

// Decision is a Rank's answer.
type Decision struct {
	// Index is the chosen candidate's index in Request.Cands; -1 when
	// none is eligible.
	Index int
	// Reason is the final reason counted for this rank (zero for a peek,
	// a single candidate or none).
	Reason Reason
	// Attempt is the pending Score work of the chosen plan; nil for a
	// peek or when Index is -1 (type Attempt: engine_impl).
	Attempt *Attempt
}

// Attempt is a selected plan's pending Score work in one group.
type Attempt struct {
	e *Engine
	attemptPlan
}

// Engine is one process's Score state.
type Engine struct {
	clock Clock
	engineState
}

// The rest of the contract (engine_impl and the files it names), as the
// group manager and the data path use it:
//
//	func NewEngine(clock Clock) *Engine
//	func (e *Engine) Configure(at time.Time, groups []GroupSpec)
//	func (e *Engine) Rank(at time.Time, r *Request) Decision
//	func (e *Engine) Probe(network netx.Network, node health.NodeID, started time.Time, rtt time.Duration, ok bool, interval time.Duration)
//	func (e *Engine) NodeDown(node health.NodeID, at time.Time)
//	func (e *Engine) Pressure(node health.NodeID, network netx.Network, at time.Time)
//	func (e *Engine) NewEpisode() EpisodeID
//	func (e *Engine) Stats() Stats
//	func (e *Engine) Explain(at time.Time, q ExplainQuery) (Explanation, bool)
//	func (a *Attempt) Begin(at time.Time) (*Flow, error)
//	func (a *Attempt) Release(at time.Time)
//	func (f *Flow) Setup(at time.Time)
//	func (f *Flow) Response(at time.Time)
//	func (f *Flow) Progress(at time.Time, tx, rx int64)
//	func (f *Flow) Settle(at time.Time)
//	func (f *Flow) Fail(at time.Time, failure Failure)
//	func (f *Flow) Cancel(at time.Time)
//	type Reason uint8 // ColdExplore … PerformanceWinner; String() is the camelCase name

// Reason is the one final reason an authorized multi-candidate rank
// counts.
type Reason uint8

const (
	NoReason Reason = iota
	ColdExplore
	PeriodicExplore
	IncumbentIneligible
	FreshFailureBypass
	InsufficientEvidenceHeld
	DirectionalTradeoffHeld
	IncumbentHeld
	ReliabilityWinner
	PerformanceWinner
	NumReasons
)

var reasonNames = [NumReasons]string{"", "coldExplore", "periodicExplore", "incumbentIneligible", "freshFailureBypass",
	"insufficientEvidenceHeld", "directionalTradeoffHeld", "incumbentHeld", "reliabilityWinner", "performanceWinner"}

func (r Reason) String() string {
	if r < NumReasons {
		return reasonNames[r]
	}
	return "unknown"
}

// Keep the imports the contract's signatures name.
var _ = time.Second
