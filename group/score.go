package group

// The Score policy: a group's pick is the process's Score engine's rank of
// its candidates for the flow's target (group/score). The group builds the
// candidates (its members after the liveness filter: a leaf itself, a
// sub-group its own pick), ranks, and hands the data path the chosen
// plan's attempt (plane.Query.Attempts); every Score group a walk
// traverses attributes the leaf's outcome with an attempt of its own.
// Peeks (Explain, Groups, connectivity, warm-up, a quiet ranking) rank
// readonly: no attempt, no counter, no reservation.

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"switchyard/group/score"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
)

// scoreScratch is one rank's request and candidate rows, reused from flow
// to flow through scratchPool: a selection allocates no candidate slice.
type scoreScratch struct {
	req score.Request
	mis []int32 // the member index of each candidate
	lis []int32 // the leaf index of each candidate
}

var scratchPool = sync.Pool{New: func() any { return new(scoreScratch) }}

// targetFamily is the scoring bucket of a destination: its IP's family;
// V4 for a domain (its resolution happens behind the proxy, which
// speaks of no family) and for targetless work.
func targetFamily(a netx.Addr) netx.Family {
	if a.IP.IsValid() && a.IP.Is6() {
		return netx.V6
	}
	return netx.V4
}

// candidates fills sc with g's members through the liveness filter,
// quietly, in declaration order: a leaf member is its own candidate
// (Eligible: it passed the filter; one the filter excludes is still
// shown, ineligible, so the engine counts it deadFiltered), a sub-group
// the leaf its own policy picks (Subgroup: its tag; one with no pick is
// no candidate). A member whose leaf is not known without asking a
// balancer, or that has no node identity, is no candidate: there is
// nothing to score.
func (m *Manager) candidates(w *walker, g *grp, net, fam int, sc *scoreScratch) {
	// Local slices, stored back once: appending through sc's fields would
	// store a slice header (a pointer) into the pooled scratch per member.
	cands, mis, lis := sc.req.Cands[:0], sc.mis[:0], sc.lis[:0]
	if n := len(g.members); cap(cands) < n || cap(mis) < n || cap(lis) < n {
		cands, mis, lis = make([]score.Candidate, 0, n), make([]int32, 0, n), make([]int32, 0, n)
	}
	p, r := w.quiet()
	for i := range g.members {
		mi := int32(i)
		e := &g.members[mi]
		_, li, x := m.member(w, g, mi, net, fam)
		switch {
		case x == exOK && li >= 0:
		case e.kind == kindLeaf && (x == exDead || x == exNoUDP || x == exUDPDead || x == exURL):
			li = e.idx
		default:
			continue
		}
		if m.leaves[li].Node.IsZero() {
			continue
		}
		// Written in place field by field: the row's Subgroup (the only
		// pointer) is stored only when it changes.
		cands = cands[:len(cands)+1]
		c := &cands[len(cands)-1]
		c.Node, c.Eligible, c.Utility, c.ProbeRTT, c.Winner = m.leaves[li].Node, x == exOK, 0, 0, false
		tag := ""
		if e.kind == kindGroup {
			tag = e.tag
		}
		if c.Subgroup != tag {
			c.Subgroup = tag
		}
		mis, lis = append(mis, mi), append(lis, li)
	}
	sc.req.Cands, sc.mis, sc.lis = cands, mis, lis
	w.loud(p, r)
}

// request is g's Score request for the walk's query over sc's candidates.
func (m *Manager) request(w *walker, g *grp, net int, sc *scoreScratch) *score.Request {
	q := w.q
	r := &sc.req
	cands := r.Cands
	*r = score.Request{
		Group:   score.GroupID(g.id.ID),
		Network: netx.Network(net),
		Family:  targetFamily(q.Dst),
		Target:  q.Dst,
		Cands:   cands,
		Peek:    w.peek || q.Peek,
	}
	if !r.Peek && q.Retry {
		r.Retry, r.Exclude = true, health.NodeID(q.Exclude)
	}
	return r
}

// scorePick is the Score policy's pick of g for (network, family).
func (m *Manager) scorePick(w *walker, g *grp, net, fam int) (*plane.Target, int32, int32) {
	sc := scratchPool.Get().(*scoreScratch)
	defer scratchPool.Put(sc)
	m.candidates(w, g, net, fam, sc)
	if len(sc.req.Cands) == 0 {
		return nil, none, none
	}
	now := m.now()
	d := m.score.Rank(now, m.request(w, g, net, sc))
	if d.Index < 0 || d.Index >= len(sc.mis) {
		if d.Attempt != nil {
			d.Attempt.Release(now)
		}
		return nil, none, none
	}
	mi, want := sc.mis[d.Index], sc.lis[d.Index]
	// The chosen member again, in the walk's own mode: it records the
	// chain, and a sub-group makes its real selection (its own attempt
	// when it is a Score group).
	t, li, x := m.member(w, g, mi, net, fam)
	if d.Attempt != nil {
		if x == exOK && li == want {
			w.q.Attempts.Add(scoreAttempt{d.Attempt}, now)
		} else {
			// The sub-group served another leaf than the one ranked:
			// this group's plan does not hold, the flow goes unscored
			// here (the sub-group scores its own).
			d.Attempt.Release(now)
		}
	}
	if x != exOK || li == none {
		return nil, none, none
	}
	return t, li, mi
}

// ScoreGroups are the Score groups of the configuration as the engine is
// configured with them: each group's UUID, its configured member count
// and every leaf it can select (finals included) at its incarnation.
func (m *Manager) ScoreGroups() []score.GroupSpec {
	var out []score.GroupSpec
	for i := range m.groups {
		g := &m.groups[i]
		if g.pol != scoring {
			continue
		}
		s := score.GroupSpec{ID: score.GroupID(g.id.ID), Members: len(g.members)}
		for _, li := range g.closure {
			l := &m.leaves[li]
			s.Leaves = append(s.Leaves, score.Leaf{Node: l.Node, Incarnation: l.Incarnation})
		}
		out = append(out, s)
	}
	return out
}

// ConfigureScore configures the Score engine with this configuration's
// Score groups: the supervisor calls it as it publishes the Manager (a
// Manager built for a reload that fails never configures it).
func (m *Manager) ConfigureScore(at time.Time) {
	if m.score != nil {
		m.score.Configure(at, m.ScoreGroups())
	}
}

// Score is the Score engine the Manager ranks with; nil when it has no
// Score group and was given none.
func (m *Manager) Score() *score.Engine { return m.score }

// scoreAttempt is a Score attempt as the data path sees it.
type scoreAttempt struct{ a *score.Attempt }

var _ plane.Attempt = scoreAttempt{}

func (s scoreAttempt) Begin(at time.Time) (plane.Report, error) {
	f, err := s.a.Begin(at)
	if err != nil {
		return nil, err
	}
	return &scoreReport{f: f}, nil
}

func (s scoreAttempt) Release(at time.Time) { s.a.Release(at) }

// scoreReport is one begun flow's Score reporter.
type scoreReport struct {
	f     *score.Flow
	setup bool
}

func (r *scoreReport) Setup(at time.Time) {
	r.setup = true
	r.f.Setup(at)
}

func (r *scoreReport) Response(at time.Time)               { r.f.Response(at) }
func (r *scoreReport) Progress(at time.Time, tx, rx int64) { r.f.Progress(at, tx, rx) }
func (r *scoreReport) Settle(at time.Time)                 { r.f.Settle(at) }
func (r *scoreReport) Cancel(at time.Time)                 { r.f.Cancel(at) }

// Fail classifies err (classifyScore) and fails the flow with that
// failure, or cancels it when the error is neutral.
func (r *scoreReport) Fail(at time.Time, err error) {
	f, neutral := classifyScore(err, r.setup)
	if neutral {
		r.f.Cancel(at)
		return
	}
	r.f.Fail(at, f)
}

// classifyScore is the Score provenance of a flow's error: the single call
// site the data path's failures are classified at. A silent target
// (plane.ErrNoResponse) is an I/O failure of the flow's target; anything
// else is score.Classify's (typed faults, the process's own neutral ends,
// the unknown rest).
func classifyScore(err error, afterSetup bool) (score.Failure, bool) {
	if errors.Is(err, plane.ErrNoResponse) {
		return score.Failure{Kind: score.FlowIO}, false
	}
	return score.Classify(err, afterSetup)
}

// scoreRetry is the one sequential retry of a Score-owned setup failure of
// q's flow on failed: the walk again from the route's group gi with the
// failed node excluded from every Score group on it. It holds only when
// the walk reaches the innermost Score group of the primary chain by the
// same path (the Selector choices and finals the primary took) and that
// group chooses a different leaf; nil otherwise, and after one retry.
func (m *Manager) scoreRetry(q *plane.Query, inner int, failed *plane.Target) []*plane.Target {
	if q.Retry || failed == nil || failed.IsChooser() {
		return nil
	}
	node := health.NodeID(failed.Node())
	for i := range m.leaves {
		if l := &m.leaves[i]; l.Target == failed {
			if l.Block {
				return nil // block is a terminal action, not a failure to retry
			}
			node = l.Node
			break
		}
	}
	if node.IsZero() {
		return nil
	}
	gi, ok := m.byTag[q.Chain[0]]
	if !ok {
		return nil
	}
	var prefix [plane.MaxGroupDepth + 2]string
	copy(prefix[:inner+1], q.Chain[:inner+1])
	now := m.now()
	q.Attempts.Release(now)
	q.Exclude, q.Retry = node, true
	q.Depth = 0
	q.Push(m.groups[gi].tag)
	var w walker
	w.q, w.rec = q, true
	w.stack[0], w.n = gi, 1
	t, li := m.resolve(&w, gi, int(q.Network), int(q.Family), true)
	if li < 0 || t == nil || t == failed || t.IsChooser() || q.Depth <= inner || !slices.Equal(q.Chain[:inner+1], prefix[:inner+1]) {
		q.Attempts.Release(now)
		return nil
	}
	if q.Chain[q.Depth-1] != t.ID().Tag {
		q.Push(t.ID().Tag)
	}
	return []*plane.Target{t}
}

// ScoreGroupStats are one Score group's counters on one network, named.
type ScoreGroupStats struct {
	Group string `json:"group"`
	score.GroupStats
}

// ScoreStats are the Score engine's counters for the API and the metrics:
// each Score group of this configuration by name and network, and the
// evidence caches' totals. They hold no node, target or cell identity.
type ScoreStats struct {
	Groups []ScoreGroupStats `json:"groups"`
	Cache  score.CacheStats  `json:"cache"`
}

// ScoreStats reads the engine's counters (its atomics and short table
// locks, never one a dial holds) and names this configuration's groups.
// Counters of a group the engine knows and this Manager does not (a
// reload in between) are left out.
func (m *Manager) ScoreStats() ScoreStats {
	out := ScoreStats{Groups: []ScoreGroupStats{}}
	if m.score == nil {
		return out
	}
	st := m.score.Stats()
	out.Cache = st.Cache
	names := make(map[score.GroupID]string)
	for i := range m.groups {
		if g := &m.groups[i]; g.pol == scoring {
			names[score.GroupID(g.id.ID)] = g.tag
		}
	}
	for _, gs := range st.Groups {
		if name, ok := names[gs.ID]; ok {
			out.Groups = append(out.Groups, ScoreGroupStats{Group: name, GroupStats: gs})
		}
	}
	return out
}

// scoreWhy is the candidates of a Score group for Explain with each
// eligible member's utility in the readonly aggregate ranking (no
// target: the scorer's global and family evidence), and the reason of
// its pick mi.
func (m *Manager) scoreWhy(w *walker, g *grp, net, fam int, mi int32) ([]Candidate, Reason, string) {
	rows := make([]Candidate, 0, len(g.members))
	p, rc := w.quiet()
	for i := range g.members {
		_, li, ex := m.member(w, g, int32(i), net, fam)
		rows = append(rows, m.candidate(g, int32(i), li, ex, fam))
	}
	var sc scoreScratch
	m.candidates(w, g, net, fam, &sc)
	w.loud(p, rc)
	if len(sc.req.Cands) > 0 {
		req := m.request(w, g, net, &sc)
		req.Peek, req.Target, req.Family = true, netx.Addr{}, netx.V4
		m.score.Rank(m.now(), req)
		for j, c := range req.Cands {
			r := &rows[sc.mis[j]]
			r.Utility, r.Scored = c.Utility, true
		}
	}
	if mi < 0 {
		return rows, "", ""
	}
	eligible := 0
	for _, c := range sc.req.Cands {
		if c.Eligible {
			eligible++
		}
	}
	return rows, ReasonScored, fmt.Sprintf("the scorer's %s winner over targetless evidence, among %d eligible members; each flow is ranked for its own target", netx.Network(net), eligible)
}

// scoreLastResort enters a Score group's TCP last resort (its only leaf
// s, dead, served anyway) in its serving pool: one candidate, ranked as
// the last resort (no reason counted), whose attempt reports like any.
func (m *Manager) scoreLastResort(w *walker, g *grp, s int32) {
	l := &m.leaves[s]
	if l.Node.IsZero() {
		return
	}
	sc := scratchPool.Get().(*scoreScratch)
	defer scratchPool.Put(sc)
	c := score.Candidate{Node: l.Node, Eligible: true}
	for j := range g.members {
		if e := &g.members[j]; m.holds(e, s) {
			if e.kind == kindGroup {
				c.Subgroup = e.tag
			}
			break
		}
	}
	sc.req.Cands = append(sc.req.Cands[:0], c)
	req := m.request(w, g, tcp, sc)
	req.LastResort = true
	now := m.now()
	if d := m.score.Rank(now, req); d.Attempt != nil {
		w.q.Attempts.Add(scoreAttempt{d.Attempt}, now)
	}
}
