package score

import (
	"time"

	"switchyard/netx"
)

// Stats is the Engine's exported counters (/switchyard/v1/stats/score and
// the metrics): per configured group and network, and the evidence
// caches' totals. It holds no node, target or cell identity.
type Stats struct {
	Groups []GroupStats `json:"groups"`
	Cache  CacheStats   `json:"cache"`
}

// GroupStats are one (group, network)'s counters. ID is for the caller
// (the API adds the group's name); it is not exported.
type GroupStats struct {
	ID      GroupID      `json:"-"`
	Network string       `json:"network"`
	Reasons ReasonCounts `json:"reasons"`
	// OrdinarySwitch counts committed ordinary A→B changes within one
	// (group, network, family, target) history; SwitchFlap the subset
	// returning to the prior winner within FlapWindow selections.
	OrdinarySwitch int64 `json:"ordinarySwitch"`
	SwitchFlap     int64 `json:"switchFlap"`
	// Affected candidates, counted once per rank each.
	DeadFiltered       int64       `json:"deadFiltered"`
	FailStreakExcluded int64       `json:"failStreakExcluded"`
	ExploreBackedOff   int64       `json:"exploreBackedOff"`
	BudgetBlocked      int64       `json:"budgetBlocked"`
	InFlight           int64       `json:"inFlight"`
	Budget             BudgetStats `json:"budget"`
	// Verification counts the authorized multi-candidate ranks whose
	// ordinary selection was provisional or observed usable, and those
	// that dispatched a validation trial.
	Verification VerificationStats `json:"verification"`
	Pool         PoolStats         `json:"pool"`
}

// ReasonCounts are the nine final reasons' counters.
type ReasonCounts struct {
	ColdExplore              int64 `json:"coldExplore"`
	PeriodicExplore          int64 `json:"periodicExplore"`
	IncumbentIneligible      int64 `json:"incumbentIneligible"`
	FreshFailureBypass       int64 `json:"freshFailureBypass"`
	InsufficientEvidenceHeld int64 `json:"insufficientEvidenceHeld"`
	DirectionalTradeoffHeld  int64 `json:"directionalTradeoffHeld"`
	IncumbentHeld            int64 `json:"incumbentHeld"`
	ReliabilityWinner        int64 `json:"reliabilityWinner"`
	PerformanceWinner        int64 `json:"performanceWinner"`
}

// Get returns reason r's count.
func (c ReasonCounts) Get(r Reason) int64 {
	switch r {
	case ColdExplore:
		return c.ColdExplore
	case PeriodicExplore:
		return c.PeriodicExplore
	case IncumbentIneligible:
		return c.IncumbentIneligible
	case FreshFailureBypass:
		return c.FreshFailureBypass
	case InsufficientEvidenceHeld:
		return c.InsufficientEvidenceHeld
	case DirectionalTradeoffHeld:
		return c.DirectionalTradeoffHeld
	case IncumbentHeld:
		return c.IncumbentHeld
	case ReliabilityWinner:
		return c.ReliabilityWinner
	case PerformanceWinner:
		return c.PerformanceWinner
	}
	return 0
}

// BudgetStats sum the group's trial budget scopes on the network (both
// target families).
type BudgetStats struct {
	Earned   float64 `json:"earned"`   // E
	Spent    int64   `json:"spent"`    // V
	Reserved int64   `json:"reserved"` // R
	// Credit is what can still be reserved: B + ⌊E⌋ − V − R.
	Credit    int64      `json:"credit"`
	Originals int64      `json:"originals"`
	Trials    TrialStats `json:"trials"`
	Elapsed   float64    `json:"elapsedSeconds"` // begun trials' observed flow time
	Setup     float64    `json:"setupSeconds"`   // begun trials' observed setup time
}

// TrialStats are the trial outcome counters.
type TrialStats struct {
	Begun        int64 `json:"begun"`
	Succeeded    int64 `json:"succeeded"`
	Failed       int64 `json:"failed"`
	Refused      int64 `json:"refused"`
	Inconclusive int64 `json:"inconclusive"`
	Refunded     int64 `json:"refunded"`
	Expired      int64 `json:"expired"`
}

// VerificationStats are a group/network's verification counters.
type VerificationStats struct {
	Provisional    int64 `json:"provisional"`
	ObservedUsable int64 `json:"observedUsable"`
	Validation     int64 `json:"validation"`
}

// PoolStats is the committed serving pool.
type PoolStats struct {
	Capacity int `json:"capacity"`
	Members  int `json:"members"`
}

// CacheStats are the evidence caches' totals.
type CacheStats struct {
	ExactCells      int   `json:"exactCells"`
	AggregateCells  int   `json:"aggregateCells"`
	ComparisonCells int   `json:"comparisonCells"`
	ComparisonBytes int64 `json:"comparisonBytes"`
	HistoryEntries  int   `json:"historyEntries"`
}

// Stats reads every counter: atomics and short table locks that no dial
// or drain ever holds.
func (e *Engine) Stats() Stats {
	cfg := e.cfg.Load()
	var st Stats
	for _, id := range cfg.order {
		g := cfg.groups[id]
		for _, net := range [...]netx.Network{netx.TCP, netx.UDP} {
			nc := &g.c.nets[netIndex(net)]
			gs := GroupStats{ID: id, Network: net.String(),
				OrdinarySwitch: nc.ordinarySwitch.Load(), SwitchFlap: nc.switchFlap.Load(),
				DeadFiltered: nc.deadFiltered.Load(), FailStreakExcluded: nc.failStreakExcluded.Load(),
				ExploreBackedOff: nc.exploreBackedOff.Load(), BudgetBlocked: nc.budgetBlocked.Load(), InFlight: nc.inFlight.Load(),
				Verification: VerificationStats{Provisional: nc.provisional.Load(), ObservedUsable: nc.usable.Load(), Validation: nc.validation.Load()}}
			r := &gs.Reasons
			for i, p := range [...]*int64{&r.ColdExplore, &r.PeriodicExplore, &r.IncumbentIneligible, &r.FreshFailureBypass,
				&r.InsufficientEvidenceHeld, &r.DirectionalTradeoffHeld, &r.IncumbentHeld, &r.ReliabilityWinner, &r.PerformanceWinner} {
				*p = nc.reasons[i+1].Load()
			}
			b := &gs.Budget
			for _, fam := range [...]netx.Family{netx.V4, netx.V6} {
				l, ok := e.budget.Ledger(BudgetKey{Group: id, Network: net, Family: fam})
				if !ok {
					continue
				}
				b.Earned += l.Earned
				b.Spent += l.Spent
				b.Reserved += l.Reserved
				b.Credit += max(0, int64(l.ColdAllowance)+int64(l.Earned)-l.Spent-l.Reserved)
				c := l.Counts
				b.Originals += c.Originals
				b.Trials.Begun += c.Begun
				b.Trials.Succeeded += c.Succeeded
				b.Trials.Failed += c.Failed
				b.Trials.Refused += c.Refused
				b.Trials.Inconclusive += c.Inconclusive
				b.Trials.Refunded += c.Refunded
				b.Trials.Expired += c.Expired
			}
			b.Elapsed = time.Duration(nc.trialElapsed.Load()).Seconds()
			b.Setup = time.Duration(nc.trialSetup.Load()).Seconds()
			if p := e.pools.peek(id, net); p != nil {
				gs.Pool.Capacity, gs.Pool.Members = p.size()
			}
			st.Groups = append(st.Groups, gs)
		}
	}
	st.Cache.ExactCells, st.Cache.AggregateCells = e.scorer.Cells()
	st.Cache.ComparisonCells, st.Cache.ComparisonBytes = e.cmp.size()
	st.Cache.HistoryEntries = e.hist.len()
	return st
}
