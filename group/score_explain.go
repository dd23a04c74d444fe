package group

// A Score group's conditional-verification summary, as people read it:
// the engine's readonly Explain (group/score) over the group's current
// candidates, its candidate indexes mapped to member tags. Member tags
// are configuration; the engine's node identities, targets and cells
// never leave it. Reading changes nothing: no pool, scope, trial,
// counter, clock or history moves.

import (
	"errors"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
	"switchyard/plane"
)

// ErrNotScore refuses a Score explanation of a group whose policy is not
// score.
var ErrNotScore = errors.New("the group's policy is not score")

// ErrBadTarget refuses a Score explanation of a target the engine cannot
// key evidence by.
var ErrBadTarget = errors.New("the target cannot key Score evidence")

// ScoreExplanation is a Score group's readonly summary for one network
// and target family: the aggregate read, or one exact target's. Members
// are named by their tag in the group.
type ScoreExplanation struct {
	// Exact is true for an exact-target read.
	Exact bool `json:"exact"`
	// Selected is the ordinary selection's member ("" when none).
	Selected       string `json:"selected"`
	Provisional    bool   `json:"provisional"`
	ObservedUsable bool   `json:"observedUsable"`
	// Question and WaitReason are those of the first member of the
	// dispatch order with an open question.
	Question         string              `json:"question"`
	WaitReason       string              `json:"waitReason"`
	NextBusinessFlow *ScoreNextFlow      `json:"nextBusinessFlow"`
	Relations        []ScoreRelation     `json:"relations"`
	Members          []ScoreMemberStatus `json:"members"`
	// LastReason is the last final reason counted for the group and
	// network ("" before any).
	LastReason string `json:"lastReason"`
}

// ScoreNextFlow is the member the next original business of the scope
// would validate, and its question: future demand, not a reservation.
type ScoreNextFlow struct {
	Member   string `json:"member"`
	Question string `json:"question"`
}

// ScoreRelation is one challenger's readonly response relation with the
// selection, on its own original pair.
type ScoreRelation struct {
	Member       string    `json:"member"`
	Relation     string    `json:"relation"`
	Faster       string    `json:"faster,omitempty"`
	Basis        string    `json:"basis"`
	SelectionMs  float64   `json:"selectionMs"`
	ChallengerMs float64   `json:"challengerMs"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// ScoreMemberStatus is one evaluated challenger's open question and wait,
// in dispatch order.
type ScoreMemberStatus struct {
	Member     string `json:"member"`
	Question   string `json:"question"`
	WaitReason string `json:"waitReason"`
}

// ExplainScore is the Score summary of group for network: health family
// f filters the candidates as a flow's walk would; target, when valid,
// asks for that exact target's read (its scoring family is the one a
// flow to it ranks in: its IP's, IPv4 for a domain), otherwise the
// aggregate read of target family f.
func (m *Manager) ExplainScore(group string, network netx.Network, f netx.Family, target netx.Addr) (ScoreExplanation, error) {
	gi, ok := m.byTag[group]
	if !ok || network > netx.UDP || f > netx.V6 {
		return ScoreExplanation{}, ErrUnknownGroup
	}
	g := &m.groups[gi]
	if g.pol != scoring || m.score == nil {
		return ScoreExplanation{}, ErrNotScore
	}
	var q plane.Query
	w := m.peeker(&q, gi, network, f)
	var sc scoreScratch
	m.candidates(&w, g, int(network), int(f), &sc)
	fam := f
	if target.IsValid() {
		fam = targetFamily(target)
	}
	x, ok := m.score.Explain(m.now(), score.ExplainQuery{
		Group: score.GroupID(g.id.ID), Network: network, Family: fam, Target: target, Cands: sc.req.Cands,
	})
	if !ok {
		if target.IsValid() {
			return ScoreExplanation{}, ErrBadTarget
		}
		return ScoreExplanation{}, ErrNotScore // not (yet) configured in the engine
	}
	return m.nameScore(g, &sc, x), nil
}

// nameScore maps x's candidate indexes to g's member tags.
func (m *Manager) nameScore(g *grp, sc *scoreScratch, x score.Explanation) ScoreExplanation {
	name := func(i int) string {
		if i < 0 || i >= len(sc.mis) {
			return ""
		}
		return g.members[sc.mis[i]].tag
	}
	out := ScoreExplanation{
		Exact: x.Exact, Selected: name(x.Selected), Provisional: x.Provisional, ObservedUsable: x.ObservedUsable,
		Question: x.Question, WaitReason: x.WaitReason, LastReason: x.LastReason,
		Relations: make([]ScoreRelation, 0, len(x.Relations)), Members: make([]ScoreMemberStatus, 0, len(x.Members)),
	}
	if n := x.NextBusinessFlow; n != nil {
		out.NextBusinessFlow = &ScoreNextFlow{Member: name(n.Member), Question: n.Question}
	}
	for _, r := range x.Relations {
		out.Relations = append(out.Relations, ScoreRelation{Member: name(r.Member), Relation: r.Relation, Faster: r.Faster,
			Basis: r.Basis, SelectionMs: r.SelectionMs, ChallengerMs: r.ChallengerMs, ExpiresAt: r.ExpiresAt})
	}
	for _, s := range x.Members {
		out.Members = append(out.Members, ScoreMemberStatus{Member: name(s.Member), Question: s.Question, WaitReason: s.WaitReason})
	}
	return out
}
