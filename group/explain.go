package group

import (
	"fmt"
	"time"

	"switchyard/netx"
	"switchyard/plane"
)

// Reason is the machine-readable reason of an Explanation's outcome.
type Reason string

const (
	ReasonChosen     Reason = "chosen"           // selector: the choice written by hand
	ReasonDefault    Reason = "default"          // selector: the group's configured default
	ReasonFirst      Reason = "first_member"     // selector: the first declared member
	ReasonLowest     Reason = "lowest_average"   // urltest: the lowest average
	ReasonHeld       Reason = "within_tolerance" // urltest: the incumbent, within tolerance of the lowest
	ReasonUnmeasured Reason = "unmeasured"       // urltest: nothing measured: the first eligible member
	ReasonPinned     Reason = "pinned"           // fallback: the pin
	ReasonRoundRobin Reason = "round_robin"      // loadbalance: the next eligible member
	ReasonScored     Reason = "score_aggregate"  // score: the scorer's winner over targetless (aggregate) evidence
	ReasonIPv4       Reason = "ipv4_path"        // nothing eligible over IPv6: the pick over IPv4
	ReasonFinal      Reason = "final"            // nothing eligible: the final
	ReasonLastResort Reason = "last_resort"      // the only leaf, TCP-dead, served anyway
	ReasonRefused    Reason = "refused"          // no leaf: flows are refused
)

// Exclusion is the machine-readable reason a candidate is not eligible.
type Exclusion string

const (
	ExclusionDead      Exclusion = "dead"           // TCP liveness
	ExclusionNoUDP     Exclusion = "no_udp"         // the leaf cannot carry UDP
	ExclusionUDPDead   Exclusion = "udp_dead"       // not UDP-eligible
	ExclusionCheckURL  Exclusion = "check_url_dead" // the group's check_url probe of the member fails
	ExclusionCut       Exclusion = "cut_cycle"      // the member closes a cycle
	ExclusionDepth     Exclusion = "too_deep"       // deeper than plane.MaxGroupDepth groups
	ExclusionCycle     Exclusion = "cycle"          // already on the walk
	ExclusionNoPick    Exclusion = "no_pick"        // a sub-group or balancer yields no leaf
	ExclusionNotChosen Exclusion = "not_chosen"     // a Selector's unchosen sibling
)

var exclusions = [...]Exclusion{"", ExclusionDead, ExclusionNoUDP, ExclusionUDPDead, ExclusionCheckURL, ExclusionCut, ExclusionDepth, ExclusionCycle, ExclusionNoPick}

// Candidate is one member as a selection sees it.
type Candidate struct {
	Member   string
	Kind     string // outbound | balancer | group
	Leaf     string // the leaf it reaches now; "" when none or behind a balancer
	Eligible bool
	Excluded Exclusion // "" when eligible
	// Why is the exclusion as a sentence ("dead on tcp4", "cannot carry
	// UDP", "cut cycle"...), or a demotion of an eligible URLTest member
	// ("carrying 2 strikes: ranked below members without").
	Why      string
	Latency  time.Duration // the average the URLTest ranks it by
	Measured bool
	Strikes  int
	// Utility is a Score member's serving-pool-relative utility in the
	// aggregate ranking (higher wins); Scored says it was ranked.
	Utility float64
	Scored  bool
}

// Explanation is why a group serves what it serves for one network and
// health family.
type Explanation struct {
	Group      string
	Policy     string
	Network    netx.Network
	Family     netx.Family
	Candidates []Candidate
	Winner     string   // the member picked; "" when none
	Leaf       string   // the leaf served; "" when refused or behind a balancer
	Chain      []string // the selection chain; nil when refused
	Final      string   // the final followed
	Reason     Reason
	Sentence   string
	// URLTest: the winner's average, the lowest, the incumbent's and the
	// effective tolerance.
	Latency          time.Duration
	BestLatency      time.Duration
	IncumbentLatency time.Duration
	Incumbent        string
	Tolerance        time.Duration
	Since            time.Time // fallback: when the pin was set
	// Score is a Score group's aggregate conditional-verification
	// summary for the network and family (ExplainScore); nil for other
	// policies.
	Score *ScoreExplanation
}

// Explain describes the group's selection for network and health family
// now. It moves no round-robin cursor, asks no balancer and tells health
// of no selection; like the next selection, it may bring a URLTest's
// ranking or a Fallback's pin up to date.
func (m *Manager) Explain(group string, network netx.Network, f netx.Family) Explanation {
	x := Explanation{Group: group, Network: network, Family: f}
	gi, ok := m.byTag[group]
	if !ok || network > netx.UDP || f > netx.V6 {
		x.Reason, x.Sentence = ReasonRefused, "no such group"
		return x
	}
	g := &m.groups[gi]
	x.Policy = g.pol.String()
	if g.pol == urltest {
		x.Tolerance = g.tol
	}
	if g.pol == scoring {
		if sx, err := m.ExplainScore(group, network, f, netx.Addr{}); err == nil {
			x.Score = &sx
		}
	}
	net, fam := int(network), int(f)
	var q plane.Query
	w := m.peeker(&q, gi, network, f)
	t, li, mi := m.pick(&w, g, net, fam)
	x.Candidates, x.Reason, x.Sentence = m.why(&w, g, net, fam, mi, &x)
	switch {
	case li != none:
		x.Winner = g.members[mi].tag
	case fam == v6:
		if t, li, mi = m.pick(&w, g, net, v4); li != none {
			var y Explanation
			_, _, s := m.why(&w, g, net, v4, mi, &y)
			x.Winner, x.Reason = g.members[mi].tag, ReasonIPv4
			x.Sentence = "nothing is eligible over IPv6; the pick over IPv4: " + s
			break
		}
		fallthrough
	default:
		t, li = m.unpicked(&w, g, net, fam, &x)
	}
	if li != none {
		if t == nil && li >= 0 {
			t = m.leaves[li].Target
		}
		if li >= 0 {
			x.Leaf = m.leaves[li].Tag
		}
		if t != nil && q.Chain[q.Depth-1] != t.ID().Tag {
			q.Push(t.ID().Tag)
		}
		x.Chain = q.Path()
	}
	return x
}

// unpicked is what a group with no eligible pick serves, explained.
func (m *Manager) unpicked(w *walker, g *grp, net, fam int, x *Explanation) (*plane.Target, int32) {
	switch {
	case g.hasFinal && (!g.finalOK || g.final.cut):
		x.Reason = ReasonRefused
		x.Sentence = fmt.Sprintf("no eligible member, and the final %q names nothing or closes a cycle: flows are refused", g.final.tag)
	case g.hasFinal:
		t, li, _ := m.follow(w, &g.final, net, fam, true)
		if li != none {
			x.Final, x.Reason = g.final.tag, ReasonFinal
			x.Sentence = fmt.Sprintf("no eligible member: following final %q", g.final.tag)
			return t, li
		}
		x.Reason = ReasonRefused
		x.Sentence = fmt.Sprintf("no eligible member, and the final %q yields no leaf: flows are refused", g.final.tag)
	default:
		if net == tcp {
			if t, li := m.lastResort(w, g, fam); li != none {
				x.Reason, x.Sentence = ReasonLastResort, "last resort: the only leaf, dead"
				return t, li
			}
		}
		x.Reason = ReasonRefused
		x.Sentence = "no eligible member and no final: flows are refused"
		if g.pol == selector {
			if c := g.effective(net); c >= 0 {
				x.Sentence = fmt.Sprintf("the chosen member %q is not eligible (%s) and there is no final: flows are refused", g.members[c].tag, x.Candidates[c].Why)
			}
		}
	}
	return nil, none
}

// why is the candidates of g and the reason of the policy's pick mi (none:
// no pick) for (network, family).
func (m *Manager) why(w *walker, g *grp, net, fam int, mi int32, x *Explanation) ([]Candidate, Reason, string) {
	rows := make([]Candidate, 0, len(g.members))
	if g.pol == urltest {
		inc := g.cache[net][fam].prev.Load()
		var rk ranking
		m.rank(w, g, net, fam, inc, &rows, &rk)
		if mi < 0 {
			return rows, "", ""
		}
		r, s := m.urltestReason(g, &rk, x)
		return rows, r, s
	}
	if g.pol == scoring {
		return m.scoreWhy(w, g, net, fam, mi)
	}
	p, rc := w.quiet()
	eligible := 0
	for i := range g.members {
		_, li, ex := m.member(w, g, int32(i), net, fam)
		c := m.candidate(g, int32(i), li, ex, fam)
		if c.Eligible {
			eligible++
		}
		if g.pol == selector && int32(i) != g.effective(net) {
			if c.Eligible {
				c.Eligible, c.Excluded, c.Why = false, ExclusionNotChosen, "not chosen"
			} else {
				c.Why = "not chosen; " + c.Why
			}
		}
		rows = append(rows, c)
	}
	w.loud(p, rc)
	if mi < 0 {
		return rows, "", ""
	}
	switch g.pol {
	case selector:
		switch {
		case g.choice[net].Load() >= 0:
			return rows, ReasonChosen, "chosen by hand"
		case g.hasDef:
			return rows, ReasonDefault, "the group's default"
		}
		return rows, ReasonFirst, "the first declared member"
	case fallback:
		since := time.Unix(0, g.pins[net][fam].since.Load())
		x.Since = since
		return rows, ReasonPinned, "pinned by fallback since " + since.Format("15:04:05")
	}
	return rows, ReasonRoundRobin, fmt.Sprintf("round robin over %d eligible members", eligible)
}

func (m *Manager) urltestReason(g *grp, rk *ranking, x *Explanation) (Reason, string) {
	x.BestLatency, x.Latency = rk.best.lat, rk.best.lat
	inc := rk.incIdx
	if inc >= 0 {
		x.Incumbent = g.members[inc].tag
		if rk.incEligible {
			x.IncumbentLatency = rk.inc.lat
		}
	}
	var r Reason
	var s string
	switch {
	case !rk.best.measured:
		r, s = ReasonUnmeasured, "first eligible member in order: no eligible member has a measured average"
	case rk.held:
		x.Latency = rk.inc.lat
		r = ReasonHeld
		s = fmt.Sprintf("lowest average %s against the incumbent's %s within %s tolerance", ms(rk.best.lat), ms(rk.inc.lat), ms(g.tol))
	default:
		r, s = ReasonLowest, "lowest average "+ms(rk.best.lat)
		if inc >= 0 && inc != rk.best.i {
			switch {
			case !rk.incEligible:
				s += fmt.Sprintf("; the incumbent %q is not eligible", x.Incumbent)
			case rk.incStrikes > 0:
				s += fmt.Sprintf("; the incumbent %q carries %d strikes, so tolerance does not hold it", x.Incumbent, rk.incStrikes)
			case !rk.inc.measured:
				s += fmt.Sprintf("; the incumbent %q has no average", x.Incumbent)
			default:
				s = fmt.Sprintf("lowest average %s against the incumbent's %s beyond %s tolerance", ms(rk.best.lat), ms(rk.inc.lat), ms(g.tol))
			}
		}
		if rk.best.struck {
			s += " (every eligible member carries strikes)"
		}
	}
	if rk.mirror {
		s = "no UDP averages, so UDP mirrors the TCP ranking: " + s
	}
	return r, s
}

// candidate is member mi's row.
func (m *Manager) candidate(g *grp, mi, li int32, x excl, fam int) Candidate {
	e := &g.members[mi]
	c := Candidate{Member: e.tag, Kind: kindNames[e.kind], Eligible: x == exOK && li != none, Excluded: exclusions[x]}
	if li >= 0 {
		c.Leaf = m.leaves[li].Tag
	}
	f := "4"
	if fam == v6 {
		f = "6"
	}
	switch x {
	case exDead:
		c.Why = "dead on tcp" + f
	case exNoUDP:
		c.Why = "cannot carry UDP"
	case exUDPDead:
		if l := &m.leaves[e.idx]; m.h.HasUDPState(l.Node, netx.Family(fam)) {
			c.Why = "both UDP domains dead on udp" + f
		} else {
			c.Why = "no UDP state and dead on tcp" + f
		}
	case exURL:
		c.Why = fmt.Sprintf("check_url %s failing", g.url)
	case exCut:
		c.Why = "cut cycle"
	case exDepth:
		c.Why = fmt.Sprintf("deeper than %d groups", plane.MaxGroupDepth)
	case exCycle:
		c.Why = "already on this walk"
	case exNoPick:
		c.Why = fmt.Sprintf("%s %q yields no eligible leaf", kindNames[e.kind], e.tag)
	}
	if c.Eligible && g.pol == urltest && li >= 0 {
		if s := m.strikes(li); s > 0 {
			c.Why = fmt.Sprintf("carrying %d strikes: ranked below members without", s)
		}
	}
	return c
}

// ms is a latency for a sentence: whole milliseconds, or microseconds
// below one.
func ms(d time.Duration) string {
	if d >= time.Millisecond {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Microsecond).String()
}
