package group

import (
	"slices"

	"switchyard/plane"
)

// RetryCandidates is how many leaves the one retry round of a URLTest
// setup failure tries.
const RetryCandidates = 3

// Retry is the one retry round of a URLTest setup failure of the flow q
// resolved: the leaves of the latency-ordered top RetryCandidates eligible
// members of the innermost URLTest group on q's chain, the failed leaf
// excluded (a member reaching it is skipped before the top is taken), each
// leaf once. When the innermost URLTest or Score group on the chain is a
// Score group, it is that group's one sequential different leaf instead
// (scoreRetry). nil when neither is on the chain: other policies' picks
// are authoritative.
func (m *Manager) Retry(q *plane.Query, failed *plane.Target) []*plane.Target {
	gi := none
	for i := min(q.Depth, len(q.Chain)) - 1; i >= 0; i-- {
		if j, ok := m.byTag[q.Chain[i]]; ok && m.groups[j].pol == scoring {
			return m.scoreRetry(q, i, failed)
		} else if ok && m.groups[j].pol == urltest {
			gi = j
			break
		}
	}
	if gi < 0 || q.Network > 1 || q.Family > 1 {
		return nil
	}
	g := &m.groups[gi]
	net, fam := int(q.Network), int(q.Family)
	lq := plane.Query{Network: q.Network, Family: q.Family, Dst: q.Dst, Prefer: q.Prefer}
	w := walker{q: &lq}
	w.stack[0], w.n = gi, 1
	var rows []Candidate
	m.rank(&w, g, net, fam, none, &rows, nil)
	order := make([]cand, 0, len(rows))
	for i, r := range rows {
		if r.Eligible {
			order = append(order, cand{i: int32(i), struck: r.Strikes > 0, measured: r.Measured, lat: r.Latency})
		}
	}
	slices.SortStableFunc(order, func(a, b cand) int {
		switch {
		case a.before(b):
			return -1
		case b.before(a):
			return 1
		}
		return 0
	})
	var out []*plane.Target
	for _, c := range order {
		t, _, _ := m.member(&w, g, c.i, net, fam)
		if t == nil || t == failed || slices.Contains(out, t) {
			continue
		}
		out = append(out, t)
		if len(out) == RetryCandidates {
			break
		}
	}
	return out
}
