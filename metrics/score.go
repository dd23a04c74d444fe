package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"switchyard/group"
	"switchyard/group/score"
)

// ScoreSource is implemented by a source whose groups rank with the Score
// engine: its counters, read at scrape time (atomics and short table
// locks no dial holds). The series carry group and network, never a
// node, a target or a cell.
type ScoreSource interface {
	ScoreStats() group.ScoreStats
}

var (
	scoreReasonsDesc = desc("score_reasons_total",
		"Authorized multi-candidate Score ranks by their one final reason.", "group", "network", "reason")
	scoreSwitchesDesc = desc("score_switches_total",
		"Committed ordinary changes of a target's Score winner (ordinary); those returning to the prior winner within eight selections (flap) are counted in both.", "group", "network", "kind")
	scoreCandidatesDesc = desc("score_candidates_total",
		"Candidates a Score rank filtered or held back, once per rank each: dead (deadFiltered), excluded by a failure streak (failStreakExcluded), backed off (exploreBackedOff), refused trial credit (budgetBlocked), with a trial in flight (inFlight).", "group", "network", "kind")
	scoreTrialsDesc = desc("score_trials_total",
		"Score trial outcomes: begun, succeeded, failed, refused, inconclusive, refunded, expired.", "group", "network", "outcome")
	scoreOriginalsDesc = desc("score_original_starts_total",
		"Original business starts that earned Score trial currency.", "group", "network")
	scoreCreditDesc = desc("score_trial_credit",
		"Score trial credit that can still be reserved now (B + floor(E) - V - R).", "group", "network")
	scorePoolDesc = desc("score_pool_slots",
		"A Score group's committed serving pool: its capacity k and the members holding a slot.", "group", "network", "kind")
	scoreCellsDesc = desc("score_cache_cells",
		"Score evidence cells held: exact (per target), aggregate, comparison; and history entries.", "kind")
	scoreComparisonBytesDesc = desc("score_comparison_bytes",
		"Logically accounted allocation of the Score comparison store (bounded at 1 MiB).")
)

// score emits the Score series of the groups in force.
func (s *snapshots) score(ch chan<- prometheus.Metric, src Source, k *known) {
	ss, ok := src.(ScoreSource)
	if !ok {
		return
	}
	st := ss.ScoreStats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, g := range st.Groups {
		if !k.groups[g.Group] {
			continue
		}
		for r := score.Reason(1); r < score.NumReasons; r++ {
			counter(scoreReasonsDesc, g.Reasons.Get(r), g.Group, g.Network, r.String())
		}
		counter(scoreSwitchesDesc, g.OrdinarySwitch, g.Group, g.Network, "ordinary")
		counter(scoreSwitchesDesc, g.SwitchFlap, g.Group, g.Network, "flap")
		for _, c := range []struct {
			kind string
			v    int64
		}{{"deadFiltered", g.DeadFiltered}, {"failStreakExcluded", g.FailStreakExcluded}, {"exploreBackedOff", g.ExploreBackedOff},
			{"budgetBlocked", g.BudgetBlocked}, {"inFlight", g.InFlight}} {
			counter(scoreCandidatesDesc, c.v, g.Group, g.Network, c.kind)
		}
		t := g.Budget.Trials
		for _, c := range []struct {
			outcome string
			v       int64
		}{{"begun", t.Begun}, {"succeeded", t.Succeeded}, {"failed", t.Failed}, {"refused", t.Refused},
			{"inconclusive", t.Inconclusive}, {"refunded", t.Refunded}, {"expired", t.Expired}} {
			counter(scoreTrialsDesc, c.v, g.Group, g.Network, c.outcome)
		}
		counter(scoreOriginalsDesc, g.Budget.Originals, g.Group, g.Network)
		gauge(scoreCreditDesc, float64(g.Budget.Credit), g.Group, g.Network)
		gauge(scorePoolDesc, float64(g.Pool.Capacity), g.Group, g.Network, "capacity")
		gauge(scorePoolDesc, float64(g.Pool.Members), g.Group, g.Network, "members")
	}
	c := st.Cache
	gauge(scoreCellsDesc, float64(c.ExactCells), "exact")
	gauge(scoreCellsDesc, float64(c.AggregateCells), "aggregate")
	gauge(scoreCellsDesc, float64(c.ComparisonCells), "comparison")
	gauge(scoreCellsDesc, float64(c.HistoryEntries), "history")
	gauge(scoreComparisonBytesDesc, float64(c.ComparisonBytes))
}
