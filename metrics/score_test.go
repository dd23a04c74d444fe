package metrics_test

import (
	"testing"

	"switchyard/group"
	"switchyard/group/score"
	"switchyard/metrics"
	"switchyard/track"
)

// scoreSource adds fixed Score counters to fakeSource.
type scoreSource struct {
	fakeSource
	st group.ScoreStats
}

func (s scoreSource) ScoreStats() group.ScoreStats { return s.st }

func TestScoreSeriesAreReadAtScrapeTime(t *testing.T) {
	m := metrics.New()
	gs := score.GroupStats{Network: "tcp", OrdinarySwitch: 4, SwitchFlap: 1, DeadFiltered: 6, BudgetBlocked: 2}
	gs.Reasons.ColdExplore, gs.Reasons.IncumbentHeld = 3, 11
	gs.Budget.Originals, gs.Budget.Credit, gs.Budget.Trials.Begun = 40, 5, 3
	gs.Pool.Capacity, gs.Pool.Members = 3, 2
	src := scoreSource{fakeSource: fakeSource{track.New()}, st: group.ScoreStats{
		Groups: []group.ScoreGroupStats{{Group: "smart", GroupStats: gs}, {Group: "gone", GroupStats: gs}},
		Cache:  score.CacheStats{ExactCells: 12, AggregateCells: 4, ComparisonBytes: 2048},
	}}
	m.Attach(src)
	m.Sync(metrics.Config{Groups: []string{"smart"}})
	fs := families(t, m)
	mustValue(t, fs, 3, "switchyard_score_reasons_total", "group", "smart", "network", "tcp", "reason", "coldExplore")
	mustValue(t, fs, 11, "switchyard_score_reasons_total", "group", "smart", "network", "tcp", "reason", "incumbentHeld")
	mustValue(t, fs, 0, "switchyard_score_reasons_total", "group", "smart", "network", "tcp", "reason", "performanceWinner")
	mustValue(t, fs, 4, "switchyard_score_switches_total", "group", "smart", "network", "tcp", "kind", "ordinary")
	mustValue(t, fs, 1, "switchyard_score_switches_total", "group", "smart", "network", "tcp", "kind", "flap")
	mustValue(t, fs, 6, "switchyard_score_candidates_total", "group", "smart", "network", "tcp", "kind", "deadFiltered")
	mustValue(t, fs, 2, "switchyard_score_candidates_total", "group", "smart", "network", "tcp", "kind", "budgetBlocked")
	mustValue(t, fs, 3, "switchyard_score_trials_total", "group", "smart", "network", "tcp", "outcome", "begun")
	mustValue(t, fs, 40, "switchyard_score_original_starts_total", "group", "smart", "network", "tcp")
	mustValue(t, fs, 5, "switchyard_score_trial_credit", "group", "smart", "network", "tcp")
	mustValue(t, fs, 2, "switchyard_score_pool_slots", "group", "smart", "network", "tcp", "kind", "members")
	mustValue(t, fs, 12, "switchyard_score_cache_cells", "kind", "exact")
	mustValue(t, fs, 2048, "switchyard_score_comparison_bytes")
	if _, ok := value(fs, "switchyard_score_reasons_total", "group", "gone", "network", "tcp", "reason", "coldExplore"); ok {
		t.Fatal("a group outside the configuration has a series")
	}
}
