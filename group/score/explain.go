package score

// # Conditional verification: the readonly explanation
//
// Explain answers, for one (group, network, target family) aggregate
// read or one exact target, what the Score evidence of the selected
// path is and what it is missing. It runs the rank's own evaluator — the
// ordinary selection of a readonly rank (selectOrdinary), the open
// questions of the evaluated challengers (challengers) and the budget's
// dispatch order (Budget.Preview, Walk's order and ledger rules) — and
// changes nothing: no pool is created or applied, no scope created,
// expired or spent, no counter, clock, history, LRU order or trial
// moves. Reading twice, or between two ranks, leaves the next rank's
// decision as it was.
//
// The summary:
//
//   - provisional: the selection is not qualified in the read's scope
//     (the exact cell, or the family aggregate for an aggregate read): a
//     first choice that follows evidence, not yet proven by business;
//     observedUsable: the selection's recent usability in that scope
//     (four distinct reporters in its current availability cohort).
//   - relations: per evaluated challenger whose original pair with the
//     selection has a fresh qualified response metric — the pair
//     ordinary promotion reads (exact target, else up to eight common
//     targets, else the current configured-probe cohort) — the
//     relation of the actual response values: equivalent inside the
//     inclusive symmetric 10 % band (high − low ≤ 0.1 × low; only
//     floating-point roundoff is allowed at the boundary), otherwise the
//     lower response is faster. It names its basis (targetResponse only
//     for the exact target's own pair: an exact view never labels
//     common-target or probe evidence so) and expires with the metric:
//     when the oldest shared block whose expiry leaves a side without
//     its four reporters ends (for a probe cohort also the weaker side's
//     latest support plus max(60 s, 2I)). No margin, completion
//     maturity, reliability, availability or goodput enters a relation,
//     and challengers are never compared with each other.
//   - members: the evaluated challengers in dispatch order, each with its
//     open question (recovery, availability, pair, qualification or
//     none) and its wait: none, budget (exhausted credit or a pause, or
//     behind a budget refusal in the order), inFlight (its trial for the
//     question is unanswered), backoff (after a real failure) or
//     comparableTraffic (not dispatched while its completions plus
//     unfinished work reach the selection's: the validation waits for
//     more business on the selection).
//   - question and waitReason: those of the first member of the dispatch
//     order with an open question; the wait adds only the ledger's
//     current refusal.
//   - nextBusinessFlow: future demand, not a reservation: the member the
//     next original business of this scope would validate (the walk as
//     it would run, with that business's own earned 1/q), or null when
//     the next flow would validate nothing (no open question, no credit,
//     an escape, a single candidate). An aggregate read states it for the
//     aggregate's questions.
//   - lastReason: the last final reason counter that moved for the
//     group and network.
//
// Members are referred to by their index in the caller's candidates; the
// Explanation holds no node, target or cell identity. An exact read of a
// three-member group whose incumbent (0) holds a fresh exact pair with
// member 1 while member 2 is still unqualified:
//
//	{"network":"tcp","family":"V4","exact":true,"selected":0,
//	 "provisional":false,"observedUsable":true,
//	 "question":"qualification","waitReason":"none",
//	 "nextBusinessFlow":{"member":2,"question":"qualification"},
//	 "relations":[{"member":1,"relation":"equivalent","basis":"targetResponse",
//	   "selectionMs":100,"challengerMs":105,"expiresAt":"2030-01-01T00:01:00Z"}],
//	 "members":[{"member":2,"question":"qualification","waitReason":"none"},
//	   {"member":1,"question":"none","waitReason":"none"}],
//	 "lastReason":"reliabilityWinner"}

import (
	"errors"
	"slices"
	"time"

	"switchyard/netx"
)

// ExplainQuery is one readonly explanation request.
type ExplainQuery struct {
	Group   GroupID
	Network netx.Network
	Family  netx.Family
	// Target is one exact target; the zero Addr is the aggregate read of
	// (Group, Network, Family).
	Target netx.Addr
	// Cands are the caller's current candidates, as for Rank; they are
	// not modified.
	Cands []Candidate
}

// Explanation is the readonly summary of one Explain. It marshals to
// JSON with camelCase fields and holds no node, target or cell identity:
// members are indexes into ExplainQuery.Cands.
type Explanation struct {
	Network string `json:"network"`
	Family  string `json:"family"`
	// Exact is true for an exact-target read, false for the aggregate.
	Exact bool `json:"exact"`
	// Selected is the ordinary selection's index, -1 when none.
	Selected         int               `json:"selected"`
	Provisional      bool              `json:"provisional"`
	ObservedUsable   bool              `json:"observedUsable"`
	Question         string            `json:"question"`
	WaitReason       string            `json:"waitReason"`
	NextBusinessFlow *NextBusinessFlow `json:"nextBusinessFlow"`
	Relations        []Relation        `json:"relations"`
	Members          []MemberState     `json:"members"`
	// LastReason is the last final reason counted for the group and
	// network ("" before any).
	LastReason string `json:"lastReason"`
}

// NextBusinessFlow is the member the next original business would
// validate, and the question it would answer.
type NextBusinessFlow struct {
	Member   int    `json:"member"`
	Question string `json:"question"`
}

// Relation is one evaluated challenger's readonly response relation with
// the selection.
type Relation struct {
	Member int `json:"member"`
	// Relation is "equivalent" or "faster".
	Relation string `json:"relation"`
	// Faster is "selection" or "challenger" for a faster relation.
	Faster string `json:"faster,omitempty"`
	// Basis is targetResponse, commonTargets or probeCohort.
	Basis string `json:"basis"`
	// The compared response values, in milliseconds.
	SelectionMs  float64   `json:"selectionMs"`
	ChallengerMs float64   `json:"challengerMs"`
	ExpiresAt    time.Time `json:"expiresAt"`
}

// MemberState is one evaluated challenger's question and wait.
type MemberState struct {
	Member     int    `json:"member"`
	Question   string `json:"question"`
	WaitReason string `json:"waitReason"`
}

// Relation names and bases.
const (
	RelEquivalent = "equivalent"
	RelFaster     = "faster"

	BasisTargetResponse = "targetResponse"
	BasisCommonTargets  = "commonTargets"
	BasisProbeCohort    = "probeCohort"
)

// Wait reasons.
const (
	WaitNone              = "none"
	WaitBudget            = "budget"
	WaitInFlight          = "inFlight"
	WaitComparableTraffic = "comparableTraffic"
	WaitBackoff           = "backoff"
)

// bandRoundoff is the relative floating-point roundoff the band's
// boundary allows: a few units in the last place of the larger value.
const bandRoundoff = 1e-12

// Equivalent reports whether responses a and b (any unit, non-negative)
// are practically equivalent: inside the inclusive symmetric 10 % band,
// high − low ≤ 0.1 × low, allowing only floating-point roundoff at the
// boundary. Two zero responses are equivalent; zero and a positive one
// are not.
func Equivalent(a, b float64) bool {
	lo, hi := min(a, b), max(a, b)
	d, lim := hi-lo, EquivalenceBand*lo
	return d <= lim || d-lim <= bandRoundoff*hi
}

// waitName maps a ledger answer to its wait reason.
func waitName(err error) string {
	switch {
	case err == nil:
		return WaitNone
	case BudgetWait(err):
		return WaitBudget
	case errors.Is(err, ErrInFlight):
		return WaitInFlight
	case errors.Is(err, ErrBackedOff):
		return WaitBackoff
	case errors.Is(err, errComparable):
		return WaitComparableTraffic
	}
	return WaitNone
}

func basisName(b pairBasis, exact bool) string {
	switch b {
	case basisExact:
		if exact {
			return BasisTargetResponse
		}
	case basisCommon:
		return BasisCommonTargets
	case basisProbe:
		return BasisProbeCohort
	}
	return ""
}

// Explain reads the conditional-verification summary of q at at (see
// the section above). It is false when the group is not a configured
// Score group or the target cannot key evidence.
func (e *Engine) Explain(at time.Time, q ExplainQuery) (Explanation, bool) {
	cfg := e.cfg.Load()
	g := cfg.groups[q.Group]
	tgt, hasTarget, terr := normalizeTarget(q.Target)
	if g == nil || terr != nil {
		return Explanation{}, false
	}
	fam := familyOf(q.Target, q.Family)
	ex := Explanation{Network: q.Network.String(), Family: fam.String(), Exact: hasTarget, Selected: -1,
		Question: NoQuestion.String(), WaitReason: WaitNone, Relations: []Relation{}, Members: []MemberState{}}
	if r := Reason(g.c.nets[netIndex(q.Network)].last.Load()); r != NoReason {
		ex.LastReason = r.String()
	}
	if len(q.Cands) == 0 {
		return ex, true
	}
	r := &Request{Group: q.Group, Network: q.Network, Family: q.Family, Target: q.Target, Cands: slices.Clone(q.Cands), Peek: true}
	sc := new(rankScratch)
	e.selectOrdinary(at, r, sc, tgt, hasTarget)
	sel := sc.d.sel
	if sel < 0 {
		return ex, true
	}
	ex.Selected = sel
	vs := &sc.views[sel]
	ex.Provisional = !qualifiedIn(vs, hasTarget)
	ex.ObservedUsable = usableIn(vs, hasTarget)

	bk := BudgetKey{Group: q.Group, Network: q.Network, Family: fam}
	e.challengers(sc, r, g, bk, sel, hasTarget, true)
	next := e.budget.Preview(bk, Selection{Usable: usableIn(vs, hasTarget), Completions: int(vs.Support)}, sc.ch, !hasTarget)
	// The next flow validates only where an authorized rank walks: a
	// multi-candidate rank that did not escape to a different leaf.
	if next >= 0 && sc.multi && !sc.d.escape {
		ch := &sc.ch[next]
		ex.NextBusinessFlow = &NextBusinessFlow{Member: ch.idx, Question: ch.Question.String()}
	}
	first := true
	for i := range sc.ch {
		ch := &sc.ch[i]
		if ch.Question == NoQuestion {
			continue
		}
		ex.Members = append(ex.Members, MemberState{Member: ch.idx, Question: ch.Question.String(), WaitReason: waitName(ch.Wait)})
		if first {
			ex.Question, ex.WaitReason, first = ch.Question.String(), waitName(ch.Wait), false
		}
	}
	for i := range sc.ch {
		if ch := &sc.ch[i]; ch.Question == NoQuestion {
			ex.Members = append(ex.Members, MemberState{Member: ch.idx, Question: ch.Question.String(), WaitReason: WaitNone})
		}
	}
	// Relations, in candidate order, each on its own original pair.
	selNode := r.Cands[sel].Node
	for c := range r.Cands {
		if !slices.ContainsFunc(sc.ch, func(ch Challenger) bool { return ch.idx == c }) {
			continue
		}
		pr := e.cmp.pair(q.Group, q.Network, fam, selNode, r.Cands[c].Node, tgt, hasTarget, sc.now, noCut, true)
		if !pr.m[cmpResponse].known {
			continue
		}
		rel := Relation{Member: c, Relation: RelEquivalent, Basis: basisName(pr.basis, hasTarget),
			SelectionMs: pr.resp.sel, ChallengerMs: pr.resp.ch, ExpiresAt: time.Unix(0, pr.resp.expires).UTC()}
		if rel.Basis == "" {
			continue
		}
		if !Equivalent(pr.resp.sel, pr.resp.ch) {
			rel.Relation, rel.Faster = RelFaster, "challenger"
			if pr.resp.sel < pr.resp.ch {
				rel.Faster = "selection"
			}
		}
		ex.Relations = append(ex.Relations, rel)
	}
	return ex, true
}
