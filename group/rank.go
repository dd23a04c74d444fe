package group

// URLTest ranking: candidates ordered by strikes, measurement and
// average, and the latencies they are ranked by.

import (
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// cand is one ranked candidate: strikes first, then measured before
// unmeasured, then the lower average, then declaration order.
type cand struct {
	i        int32
	struck   bool
	measured bool
	lat      time.Duration
}

func (a cand) before(b cand) bool {
	switch {
	case b.i < 0:
		return true
	case a.struck != b.struck:
		return !a.struck
	case a.measured != b.measured:
		return a.measured
	}
	return a.measured && a.lat < b.lat
}

// ranking is what a rank saw, for Explain.
type ranking struct {
	best, inc   cand
	incIdx      int32 // the incumbent ranked against
	incEligible bool
	incStrikes  int
	mirror      bool // UDP ranked by the TCP averages
	held        bool // the incumbent stayed within tolerance
	eligible    int
	// measured: an eligible candidate has ranking evidence (for UDP, in
	// DataUdp, DnsUdp or TCP); a UDP plan without is cold (coldudp.go).
	measured bool
}

// rank is the URLTest winner of g for (network, family) against the
// incumbent inc: the best candidate, unless the incumbent is eligible,
// carries no strikes, is measured and its current average is within the
// tolerance of the best's. rows and out, when not nil, receive what
// Explain shows.
func (m *Manager) rank(w *walker, g *grp, net, fam int, inc int32, rows *[]Candidate, out *ranking) int32 {
	p, r := w.quiet()
	defer w.loud(p, r)
	var bt, bu, it, iu cand
	bt.i, bu.i, it.i, iu.i = none, none, none, none
	rk := ranking{incIdx: inc}
	evidence := false
	var tcpRows []cand
	for i := range g.members {
		mi := int32(i)
		_, li, x := m.member(w, g, mi, net, fam)
		if x != exOK || li == none {
			if rows != nil {
				*rows = append(*rows, m.candidate(g, mi, li, x, fam))
				tcpRows = append(tcpRows, cand{i: none})
			}
			continue
		}
		rk.eligible++
		s := m.strikes(li)
		ct := cand{i: mi, struck: s > 0}
		ct.lat, ct.measured = m.tcpLatency(g, mi, li, fam)
		rk.measured = rk.measured || ct.measured
		cu := ct
		if net == udp {
			cu.lat, cu.measured = m.udpLatency(li, fam)
			evidence = evidence || cu.measured
			rk.measured = rk.measured || cu.measured
		}
		if ct.before(bt) {
			bt = ct
		}
		if cu.before(bu) {
			bu = cu
		}
		if mi == inc {
			it, iu, rk.incEligible, rk.incStrikes = ct, cu, true, s
		}
		if rows != nil {
			row := m.candidate(g, mi, li, exOK, fam)
			row.Strikes, row.Latency, row.Measured = s, cu.lat, cu.measured
			*rows = append(*rows, row)
			tcpRows = append(tcpRows, ct)
		}
	}
	best, in := bt, it
	if net == udp && evidence {
		best, in = bu, iu
	} else if net == udp {
		rk.mirror = true
		if rows != nil {
			for j := range *rows {
				if tcpRows[j].i >= 0 {
					(*rows)[j].Latency, (*rows)[j].Measured = tcpRows[j].lat, tcpRows[j].measured
				}
			}
		}
	}
	rk.best, rk.inc = best, in
	win := best.i
	if inc >= 0 && inc != best.i && rk.incEligible && rk.incStrikes == 0 && in.measured && best.measured && best.lat+g.tol >= in.lat {
		win, rk.held = inc, true
	}
	if out != nil {
		*out = rk
	}
	return win
}

func (m *Manager) strikes(li int32) int {
	if li < 0 || m.leaves[li].Block {
		return 0
	}
	return m.h.Strikes(m.leaves[li].Node)
}

// tcpLatency is the TCP ranking average of member mi: the group's
// (member, check_url) average when it has a check_url, else the TCP
// average of the member's current leaf.
func (m *Manager) tcpLatency(g *grp, mi, li int32, fam int) (time.Duration, bool) {
	if g.url != "" {
		return m.h.URLLatency(g.members[mi].tag, g.url)
	}
	if li < 0 || m.leaves[li].Block {
		return 0, false
	}
	return m.h.Latency(m.leaves[li].Node, health.TCP, netx.Family(fam))
}

// udpLatency is the UDP ranking average of a leaf: DataUDP, then DNSUDP.
func (m *Manager) udpLatency(li int32, fam int) (time.Duration, bool) {
	if li < 0 || m.leaves[li].Block {
		return 0, false
	}
	n := m.leaves[li].Node
	if d, ok := m.h.Latency(n, health.DataUDP, netx.Family(fam)); ok {
		return d, true
	}
	return m.h.Latency(n, health.DNSUDP, netx.Family(fam))
}
