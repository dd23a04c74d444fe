package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
	"switchyard/track"
)

// Probe's answers to a tag that names no outbound, balancer or group, and
// to one that names a block outbound.
var (
	ErrUnknownTag = errors.New("no outbound, balancer or group has this tag")
	ErrBlockTag   = errors.New("a block outbound has nothing to probe")
)

// ProbeReport is what one probe cycle found: the probed nodes in
// configuration order, and the groups asked for in the order asked (every
// group, in configuration order, when no tag was given).
type ProbeReport struct {
	Nodes  []ProbeNode
	Groups []ProbeGroup
}

// ProbeNode is one probed node after the cycle.
type ProbeNode struct {
	Name string
	// State is the node's health state. The engine was new, so its
	// histories hold this cycle's probes only.
	State health.NodeState
	// TCPErr and UDPErr are the errors of this cycle's probes of the
	// node's TCP and packet paths; nil when the probe answered or did not
	// run. UDPProbed is set when the packet path was probed ([health]
	// udp_check_dns set and the node carries UDP).
	TCPErr, UDPErr error
	UDPProbed      bool
}

// Verdict is what this cycle found of state (d, f): observed is false when
// no probe of it ended; ok is whether the last one answered.
func (n ProbeNode) Verdict(d health.Domain, f netx.Family) (observed, ok bool) {
	return cycleVerdict(n.State.Of(d, f))
}

// Answered reports whether the node answered its TCP probe.
func (n ProbeNode) Answered() bool {
	for _, f := range health.Families {
		if obs, ok := n.Verdict(health.TCP, f); obs && ok {
			return true
		}
	}
	return false
}

// RTT is the node's TCP latency: of IPv4 when it has one, else of IPv6.
func (n ProbeNode) RTT() (time.Duration, bool) {
	for _, f := range health.Families {
		if s := n.State.Of(health.TCP, f); s.HasLatency {
			return s.Latency, true
		}
	}
	return 0, false
}

// ProbeGroup is one group's selection after the cycle, over IPv4, by
// network (indexed by netx.Network): its explanation and its selection
// chain.
type ProbeGroup struct {
	Tag, Policy string
	Explain     [2]group.Explanation
	Chain       [2][]string
}

// cycleVerdict reads s as a cycle of a fresh engine left it: the last real
// history entry is the last probe; zero delay is a failure.
func cycleVerdict(s health.DomainState) (observed, ok bool) {
	h := s.Display()
	if !s.Observed || len(h) == 0 {
		return false, false
	}
	return true, h[len(h)-1].Delay > 0
}

// Probe runs one probe cycle of what tags name and reports the health of
// every probed node and the selection of the groups. A tag names an
// outbound (probed even when no group holds it), a balancer (its members)
// or a group (every leaf it reaches, finals included, and the members of
// the balancers it reaches); no tag is that of every group, or every
// outbound when there is no group. Block outbounds are never probed.
//
// s is prepared as the supervisor prepares it (outbounds, balancers, the
// group manager, a health engine registering every leaf a group reaches
// and the named nodes, each probed through its own outbound), but no
// inbound is bound and nothing periodic starts. ctx bounds the cycle.
// The groups read the cycle's outcome: a state whose probe failed in it
// reads dead, although the engine of a running process would only count
// the failure toward the three that kill it. Everything Probe built is
// closed before it returns.
func Probe(ctx context.Context, s *spec.Spec, tags []string, log *slog.Logger) (*ProbeReport, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sv := &Supervisor{log: log, opts: Options{Logger: log}, tracker: track.New(), socket: s.Socket}
	sv.conn = &connector{cell: &sv.cell, tracker: sv.tracker, log: log, health: healthReports{engine: sv.engine.Load}}
	deps, err := sv.deps(s)
	if err != nil {
		return nil, err
	}
	// The nodes' servers are resolved as the running process resolves
	// them: with [dns] when there is one.
	rt, err := sv.dnsFor(s)
	if err != nil {
		return nil, err
	}
	defer rt.close()
	deps = rt.withDNS(deps)
	eng := sv.newEngine(s.Health)
	h := &cycleHealth{eng: eng}
	p, err := prepareWith(nil, s, deps, nil, &groupEnv{health: h, log: log})
	if err != nil {
		eng.Stop()
		return nil, err
	}
	defer func() {
		eng.Stop()
		releaseProbed(p)
	}()
	rt.attach(p.plane)
	sv.cell.Store(p.plane)
	sv.groups.Store(p.next.groups)

	want, groups, err := probeSet(p.next, tags)
	if err != nil {
		return nil, err
	}
	probers := map[string]*recordingProber{}
	nodes := healthNodes(p.next, func(o spec.Outbound, out outbound.Outbound) health.Prober {
		r := &recordingProber{p: sv.prober(deps, nil, o, out)}
		probers[o.Tag] = r
		return r
	})
	registered := map[string]bool{}
	for _, n := range nodes {
		registered[n.Name] = true
	}
	ids := make([]health.NodeID, 0, len(want))
	for _, tag := range want {
		if !registered[tag] {
			r := p.next.outbounds[tag]
			pr := &recordingProber{p: sv.prober(deps, nil, r.spec, r.target.Outbound())}
			probers[tag] = pr
			nodes = append(nodes, probeNode(p.next, tag, pr))
		}
		ids = append(ids, p.next.nodeIDs[tag])
	}
	eng.Sync(nodes)
	if len(ids) > 0 { // none would probe every registered node
		eng.ProbeNow(ctx, ids...)
	}

	rep := &ProbeReport{}
	for _, tag := range want {
		st, _ := eng.State(p.next.nodeIDs[tag])
		pr := probers[tag]
		n := ProbeNode{Name: tag, State: st, UDPProbed: len(s.Health.UDPCheckDNS) > 0 && outbound.CarriesUDP(p.next.outbounds[tag].target.Outbound())}
		n.TCPErr, n.UDPErr = pr.errs()
		if obs, _ := n.Verdict(health.TCP, netx.V4); !obs && n.TCPErr == nil {
			if obs6, _ := n.Verdict(health.TCP, netx.V6); !obs6 && ctx.Err() != nil {
				n.TCPErr = fmt.Errorf("the probe did not end in time: %w", context.Cause(ctx))
			}
		}
		rep.Nodes = append(rep.Nodes, n)
	}
	m := p.next.groups
	if m == nil {
		return rep, nil
	}
	h.settle(eng, m)
	// The Score groups' engine (the manager's own here) is configured as
	// a publication configures it, so that their summaries read.
	m.ConfigureScore(time.Now())
	info := map[string]group.Info{}
	for _, g := range m.Groups() {
		info[g.Tag] = g
	}
	for _, tag := range groups {
		g := ProbeGroup{Tag: tag, Policy: info[tag].Policy}
		for _, nw := range [...]netx.Network{netx.TCP, netx.UDP} {
			g.Explain[nw] = m.Explain(tag, nw, netx.V4)
			g.Chain[nw] = m.SelectionChain(tag, nw)
		}
		rep.Groups = append(rep.Groups, g)
	}
	return rep, nil
}

// probeSet resolves tags into the outbound tags to probe, in configuration
// order, and the groups to explain.
func probeSet(st *state, tags []string) (nodes, groups []string, err error) {
	s := st.spec
	want := map[string]bool{}
	byID := make(map[health.NodeID]string, len(st.nodeIDs))
	for tag, id := range st.nodeIDs {
		byID[id] = tag
	}
	var acts map[string][]health.NodeID
	if st.groups != nil {
		acts = map[string][]health.NodeID{}
		for _, a := range st.groups.Activity() {
			acts[a.Group] = a.Nodes
		}
	}
	balancers := make(map[string][]string, len(s.Balancers))
	for _, b := range s.Balancers {
		balancers[b.Tag] = b.Members
	}
	seenGroup := map[string]bool{}
	addGroup := func(tag string) {
		for _, id := range acts[tag] {
			want[byID[id]] = true
		}
		for _, leaf := range st.groups.LeafNodeNames(tag) {
			for _, m := range balancers[leaf] {
				want[m] = true
			}
		}
		if !seenGroup[tag] {
			seenGroup[tag] = true
			groups = append(groups, tag)
		}
	}
	switch {
	case len(tags) > 0:
		for _, tag := range tags {
			_, isOut := st.outbounds[tag]
			_, isGroup := acts[tag]
			members, isBal := balancers[tag]
			switch {
			case isOut:
				if st.outbounds[tag].spec.Type == "block" {
					return nil, nil, fmt.Errorf("%q: %w", tag, ErrBlockTag)
				}
				want[tag] = true
			case isGroup:
				addGroup(tag)
			case isBal:
				for _, m := range members {
					want[m] = true
				}
			default:
				return nil, nil, fmt.Errorf("%q: %w", tag, ErrUnknownTag)
			}
		}
	case st.groups != nil:
		for _, tag := range st.groups.Tags() {
			addGroup(tag)
		}
	default:
		for _, o := range s.Outbounds {
			want[o.Tag] = true
		}
	}
	for _, o := range s.Outbounds {
		if want[o.Tag] && o.Type != "block" {
			nodes = append(nodes, o.Tag)
		}
	}
	return nodes, groups, nil
}

// probeNode is the registration of outbound tag of st, as healthNodes
// makes it.
func probeNode(st *state, tag string, p health.Prober) health.Node {
	r := st.outbounds[tag]
	return health.Node{
		ID:          st.nodeIDs[tag],
		Name:        tag,
		Incarnation: uint64(r.target.ID().Version),
		UDP:         outbound.CarriesUDP(r.target.Outbound()),
		Prober:      p,
	}
}

// releaseProbed closes what a probe's preparation built: the group
// manager, the balancers and every outbound that holds resources.
func releaseProbed(p *prepared) {
	p.discard()
	for _, b := range p.next.balancers {
		b.bal.Stop()
	}
	for _, t := range p.plane.Targets {
		t.CloseFlows()
		if !t.IsChooser() {
			t.Retire()
		}
	}
}

// recordingProber keeps the last error of each of its paths, which the
// engine does not keep.
type recordingProber struct {
	p health.Prober

	mu             sync.Mutex // guards the errors
	tcpErr, udpErr error
}

func (r *recordingProber) TCP(ctx context.Context, url, method string) (health.Result, error) {
	res, err := r.p.TCP(ctx, url, method)
	r.mu.Lock()
	r.tcpErr = err
	r.mu.Unlock()
	return res, err
}

func (r *recordingProber) UDP(ctx context.Context, server netx.Addr) (health.Result, error) {
	res, err := r.p.UDP(ctx, server)
	r.mu.Lock()
	r.udpErr = err
	r.mu.Unlock()
	return res, err
}

func (r *recordingProber) errs() (tcp, udp error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tcpErr, r.udpErr
}

// cycleHealth is the health a probe's groups read: the engine's, but for
// the states the cycle observed, which read as their last probe found
// them, alive when it answered and dead when it failed.
type cycleHealth struct {
	eng  *health.Engine
	gen  atomic.Uint64
	seen atomic.Pointer[cycleSeen]
}

type cycleSeen struct {
	nodes map[health.NodeID]*[3][2]verdict
	urls  map[[2]string]verdict // by (member, url)
}

type verdict struct{ observed, ok bool }

// settle reads the cycle's outcome off eng: every registered node's
// states and the check_url states of m's groups.
func (h *cycleHealth) settle(eng *health.Engine, m *group.Manager) {
	seen := &cycleSeen{nodes: map[health.NodeID]*[3][2]verdict{}, urls: map[[2]string]verdict{}}
	for _, a := range m.Activity() {
		for _, id := range a.Nodes {
			if _, ok := seen.nodes[id]; ok {
				continue
			}
			st, ok := eng.State(id)
			if !ok {
				continue
			}
			v := new([3][2]verdict)
			for _, d := range health.Domains {
				for _, f := range health.Families {
					v[d][f].observed, v[d][f].ok = cycleVerdict(st.Of(d, f))
				}
			}
			seen.nodes[id] = v
		}
	}
	for _, c := range m.URLChecks() {
		for _, ml := range c.Members {
			if s, _, ok := eng.URLState(ml.Member, c.URL); ok {
				var v verdict
				v.observed, v.ok = cycleVerdict(s)
				seen.urls[[2]string{ml.Member, c.URL}] = v
			}
		}
	}
	h.seen.Store(seen)
	h.gen.Add(1)
}

func (h *cycleHealth) node(id health.NodeID) *[3][2]verdict {
	if s := h.seen.Load(); s != nil {
		return s.nodes[id]
	}
	return nil
}

func (h *cycleHealth) Alive(id health.NodeID, d health.Domain, f netx.Family) bool {
	if v := h.node(id); v != nil && int(d) < len(v) && v[d][f&1].observed {
		return v[d][f&1].ok
	}
	return h.eng.Alive(id, d, f)
}

// UDPEligible is the engine's UDP rule over the cycle's outcome.
func (h *cycleHealth) UDPEligible(id health.NodeID, f netx.Family) bool {
	if !h.eng.HasUDPState(id, f) {
		return h.Alive(id, health.TCP, f)
	}
	return h.Alive(id, health.DataUDP, f) || h.Alive(id, health.DNSUDP, f)
}

func (h *cycleHealth) HasUDPState(id health.NodeID, f netx.Family) bool {
	return h.eng.HasUDPState(id, f)
}

func (h *cycleHealth) Latency(id health.NodeID, d health.Domain, f netx.Family) (time.Duration, bool) {
	return h.eng.Latency(id, d, f)
}

func (h *cycleHealth) URLLatency(member, url string) (time.Duration, bool) {
	return h.eng.URLLatency(member, url)
}

func (h *cycleHealth) URLAlive(member, url string) bool {
	if s := h.seen.Load(); s != nil {
		if v, ok := s.urls[[2]string{member, url}]; ok && v.observed {
			return v.ok
		}
	}
	return h.eng.URLAlive(member, url)
}

func (h *cycleHealth) Strikes(id health.NodeID) int { return h.eng.Strikes(id) }

// Epoch moves with the engine's and when the cycle's outcome is settled.
func (h *cycleHealth) Epoch() uint64 { return h.eng.Epoch() + h.gen.Load() }

// Selected does nothing: a probe starts nothing periodic to wake.
func (h *cycleHealth) Selected(string) {}
