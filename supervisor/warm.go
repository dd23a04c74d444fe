package supervisor

import (
	"cmp"
	"context"
	"slices"

	"switchyard/group"
	"switchyard/health"
	"switchyard/metrics"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/spec"
	"switchyard/warm"
)

// The warm-up (package warm) runs over the published generation: every
// apply hands the manager the new state's nodes and [warmup], after the
// plane is published; Start starts it once the inbounds are bound; the
// groups' OnSwitch wakes its pass; Close stops it before the outbounds
// close.

// warmConfig is [warmup] for the manager.
func warmConfig(w spec.Warmup) warm.Config {
	return warm.Config{Preconnect: w.Preconnect, UDPWarmSet: w.UDPWarmSet, SelectorPin: w.SelectorPin}
}

// syncWarm hands st, published with p, to the warm-up.
func (sv *Supervisor) syncWarm(st *state, p *plane.Plane) {
	sv.warm.Update(&warmSource{st: st, plane: p}, warmConfig(st.spec.Warmup))
}

var _ metrics.WarmSource = (*Supervisor)(nil)

// Warm reads the warm state of every node of the running configuration,
// for the API and the metrics; it takes no lock an apply, a pass or a dial
// holds.
func (sv *Supervisor) Warm() []warm.State { return sv.warm.States() }

// WarmNode reads the warm state of the outbound tagged tag.
func (sv *Supervisor) WarmNode(tag string) (warm.State, bool) { return sv.warm.State(tag) }

// onSwitchWarm is the groups' OnSwitch: the warm-up's pass wakes, and the
// metrics, when set, hear it.
func (sv *Supervisor) onSwitchWarm() func(string, netx.Network, group.SwitchReason) {
	next := sv.switchHook()
	return func(g string, n netx.Network, r group.SwitchReason) {
		sv.warm.Wake()
		if next != nil {
			next(g, n, r)
		}
	}
}

// warmSource is one generation as the warm-up reads it.
type warmSource struct {
	st    *state
	plane *plane.Plane
}

var _ warm.Source = (*warmSource)(nil)

// Nodes are the outbounds that can warm what they reuse, in spec order.
func (w *warmSource) Nodes() []warm.Node {
	var out []warm.Node
	for _, o := range w.st.spec.Outbounds {
		r := w.st.outbounds[o.Tag]
		if r == nil {
			continue
		}
		wr := outbound.WarmerOf(r.target.Outbound())
		if wr == nil {
			continue
		}
		out = append(out, warm.Node{
			ID:      w.st.nodeIDs[o.Tag],
			Version: r.target.ID().Version,
			Name:    o.Tag,
			Out:     wr,
			UDP:     outbound.CarriesUDP(r.target.Outbound()),
		})
	}
	return out
}

// node is the node identity of the outbound tagged tag.
func (w *warmSource) node(tag string) (health.NodeID, bool) {
	if _, ok := w.st.outbounds[tag]; !ok {
		return health.NodeID{}, false
	}
	id, ok := w.st.nodeIDs[tag]
	return id, ok
}

// GroupPicks are the leaves each group's TCP selection reaches now.
func (w *warmSource) GroupPicks() []health.NodeID {
	m := w.st.groups
	if m == nil {
		return nil
	}
	var out []health.NodeID
	for _, g := range m.Groups() {
		if chain := m.SelectionChain(g.Tag, netx.TCP); len(chain) > 0 {
			if id, ok := w.node(chain[len(chain)-1]); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// SelectorChoices are the leaves of every Selector's effective TCP
// member whatever its health: an outbound member is its own leaf, a
// Selector member its own choice, another group member the leaf its
// selection reaches. A balancer picks per flow: it has no leaf to pin.
func (w *warmSource) SelectorChoices() []health.NodeID {
	m := w.st.groups
	if m == nil {
		return nil
	}
	infos := m.Groups()
	byTag := make(map[string]*group.Info, len(infos))
	for i := range infos {
		byTag[infos[i].Tag] = &infos[i]
	}
	var out []health.NodeID
	for i := range infos {
		if infos[i].Policy != "selector" {
			continue
		}
		member := infos[i].Now[netx.TCP]
		for depth := 0; member != "" && depth < plane.MaxGroupDepth; depth++ {
			if id, ok := w.node(member); ok {
				out = append(out, id)
				break
			}
			sub := byTag[member]
			if sub == nil {
				break // a balancer
			}
			if sub.Policy == "selector" {
				member = sub.Now[netx.TCP]
				continue
			}
			chain := m.SelectionChain(sub.Tag, netx.TCP)
			if len(chain) > 0 {
				if id, ok := w.node(chain[len(chain)-1]); ok {
					out = append(out, id)
				}
			}
			break
		}
	}
	return out
}

// UDPRanked is, for every group and address family, its UDP ranking
// (udpRanking) as node identities.
func (w *warmSource) UDPRanked() [][]health.NodeID {
	m := w.st.groups
	if m == nil {
		return nil
	}
	var out [][]health.NodeID
	for _, g := range m.Groups() {
		for _, f := range [...]netx.Family{netx.V4, netx.V6} {
			var ranking []health.NodeID
			for _, leaf := range udpRanking(m.Explain(g.Tag, netx.UDP, f)) {
				if id, ok := w.node(leaf); ok && !slices.Contains(ranking, id) {
					ranking = append(ranking, id)
				}
			}
			if len(ranking) > 0 {
				out = append(out, ranking)
			}
		}
	}
	return out
}

// udpRanking is the leaves of a group's UDP explanation in its ranking
// order: the pick first, then the other eligible members' leaves; a
// URLTest's by its ranking (members without strikes first, measured
// before unmeasured, then the lower average, ties in declaration order),
// another policy's in declaration order. A member behind a balancer has
// no leaf of its own and is left out.
func udpRanking(x group.Explanation) []string {
	cands := slices.Clone(x.Candidates)
	if x.Policy == "urltest" {
		slices.SortStableFunc(cands, func(a, b group.Candidate) int {
			switch {
			case (a.Strikes > 0) != (b.Strikes > 0):
				return boolOrder(a.Strikes > 0)
			case a.Measured != b.Measured:
				return boolOrder(!a.Measured)
			}
			return cmp.Compare(a.Latency, b.Latency)
		})
	}
	var out []string
	if x.Leaf != "" {
		out = append(out, x.Leaf)
	}
	for _, c := range cands {
		if c.Eligible && c.Leaf != "" && !slices.Contains(out, c.Leaf) {
			out = append(out, c.Leaf)
		}
	}
	return out
}

// boolOrder sorts true after false.
func boolOrder(later bool) int {
	if later {
		return 1
	}
	return -1
}

// Begin is an establishment of the generation: its dial admission and its
// absolute deadline.
func (w *warmSource) Begin(ctx context.Context) (context.Context, func()) {
	est, actx, cancel := w.plane.Begin(ctx)
	return actx, func() {
		est.End()
		cancel()
	}
}
