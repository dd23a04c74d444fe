package supervisor

import (
	"context"
	"errors"
	"net"
	"slices"
	"time"

	"switchyard/health"
	"switchyard/health/probe"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/relay"
	"switchyard/spec"
	"switchyard/store"
	"switchyard/track"
)

// The health engine is process-wide: it probes every leaf a group can
// reach (no groups: no probes) and learns from real traffic. A reload that
// changes [health] replaces it (its states start over); any other reload
// keeps it and resynchronizes its nodes.

// newEngine is an engine for h, not started.
func (sv *Supervisor) newEngine(h spec.Health) *health.Engine {
	var dns []netx.Addr
	for _, s := range h.UDPCheckDNS {
		if a, err := netx.ParseAddr(s); err == nil {
			dns = append(dns, a)
		}
	}
	return health.New(health.Options{
		Clock:          sv.opts.clock,
		TCPCheckURLs:   h.TCPCheckURLs,
		TCPCheckMethod: h.TCPCheckMethod,
		UDPCheckDNS:    dns,
		CheckInterval:  h.CheckInterval,
		CheckTimeout:   h.CheckTimeout,
		IdleTimeout:    h.IdleTimeout,
		OnDeath:        sv.nodeDied,
		OnChange:       sv.nodeChanged,
		URLTargets:     sv.urlTargets,
		Observer:       sv.observer(h.CheckInterval),
		Log:            sv.log.With("component", "health"),
	})
}

// engineFor is the engine a generation of s reads: the running one, unless
// s changes [health].
func (sv *Supervisor) engineFor(s *spec.Spec) *health.Engine {
	if e := sv.engine.Load(); e != nil && spec.Equal(sv.healthSpec, s.Health) {
		return e
	}
	return sv.newEngine(s.Health)
}

// nodeChanged is the engine's transition callback: the published groups
// recompute the connectivity of every group the node reaches.
func (sv *Supervisor) nodeChanged(id health.NodeID) {
	if m := sv.groups.Load(); m != nil {
		m.NodeChanged(id)
	}
}

// nodeDied is the engine's alive → dead callback: the node's pooled
// connections (a QUIC connection, a tunnel, an HTTP/2 connection, XUDP
// carriers) are released, so that the next flow builds them afresh.
func (sv *Supervisor) nodeDied(id health.NodeID, name string) {
	for _, t := range sv.cell.Load().Targets {
		if t.Node() != id {
			continue
		}
		if p, ok := t.Outbound().(outbound.Purger); ok {
			p.Purge()
			sv.log.Debug("node dead: whatever connection it shares between flows is dropped", "node", name)
		}
	}
}

// urlTargets are the per-group check_url probes: every (member, url) with
// the member's current leaf, resolved again on every cycle.
func (sv *Supervisor) urlTargets() []health.URLTarget {
	m := sv.groups.Load()
	if m == nil {
		return nil
	}
	var out []health.URLTarget
	for _, c := range m.URLChecks() {
		for _, ml := range c.Members {
			out = append(out, health.URLTarget{Member: ml.Member, URL: c.URL, Node: ml.Node})
		}
	}
	return out
}

// healthNodes are the nodes the engine of st probes: every leaf its groups
// reach, finals included, but block, which is a terminal action.
func healthNodes(st *state, probers func(spec.Outbound, outbound.Outbound) health.Prober) []health.Node {
	if st.groups == nil {
		return nil
	}
	tags := make(map[health.NodeID]string, len(st.nodeIDs))
	for tag, id := range st.nodeIDs {
		tags[id] = tag
	}
	seen := map[health.NodeID]bool{}
	var nodes []health.Node
	for _, a := range st.groups.Activity() {
		for _, id := range a.Nodes {
			tag, ok := tags[id]
			if !ok || seen[id] {
				continue
			}
			seen[id] = true
			r := st.outbounds[tag]
			if r == nil || r.spec.Type == "block" {
				continue
			}
			n := health.Node{ID: id, Name: tag, Incarnation: uint64(r.target.ID().Version), UDP: outbound.CarriesUDP(r.target.Outbound())}
			if probers != nil {
				n.Prober = probers(r.spec, r.target.Outbound())
			}
			nodes = append(nodes, n)
		}
	}
	slices.SortFunc(nodes, func(a, b health.Node) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return nodes
}

// activities are the engine's view of st's groups: which hold which
// nodes, and whose probing sleeps when idle.
func activities(st *state) []health.Activity {
	if st.groups == nil {
		return nil
	}
	var out []health.Activity
	for _, a := range st.groups.Activity() {
		out = append(out, health.Activity{Group: a.Group, Sleeps: a.Sleeps, IdleTimeout: a.IdleTimeout, Nodes: a.Nodes})
	}
	return out
}

// syncHealth registers st's nodes with the engine e before st is
// published (a node the engine does not know reads as dead), and
// restores their last real delays from the store when they are new.
func (sv *Supervisor) syncHealth(e *health.Engine, st *state) {
	deps, err := sv.deps(st.spec)
	nodes := healthNodes(st, func(o spec.Outbound, out outbound.Outbound) health.Prober {
		return sv.prober(deps, err, o, out)
	})
	e.Sync(nodes)
	if sv.opts.Store == nil {
		return
	}
	for _, n := range nodes {
		if _, ok := e.LastReal(n.ID); ok {
			continue
		}
		if d, ok := sv.opts.Store.LastDelay(n.Name); ok {
			e.Restore(n.ID, health.Sample{Time: d.At, Delay: d.RTT, Family: netx.V4})
		}
	}
}

// saveDelays writes each node's last real TCP delay to the store every
// health.LastRealSaveInterval until ctx ends.
func (sv *Supervisor) saveDelays(ctx context.Context, st *store.Store) {
	t := time.NewTicker(health.LastRealSaveInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			sv.saveDelaysOnce(st)
			sv.saveFakeIPs(st)
			return
		case <-t.C:
			sv.saveDelaysOnce(st)
			sv.saveFakeIPs(st)
		}
	}
}

func (sv *Supervisor) saveDelaysOnce(st *store.Store) {
	e, ids := sv.engine.Load(), sv.nodeIDs.Load()
	if e == nil || ids == nil {
		return
	}
	for tag, id := range *ids {
		if s, ok := e.LastReal(id); ok {
			st.SetLastDelay(tag, store.Delay{RTT: s.Delay, At: s.Time})
		}
	}
}

// healthReports are what the connector tells the engine of real traffic.
type healthReports struct {
	engine func() *health.Engine
}

// familyOf is the address family of the connection to the proxy server
// that carries c: what the outbound says (a tunnel, a QUIC connection,
// whose streams name something else), else c's remote address; IPv4 when
// neither tells.
func familyOf(out any, c net.Conn) netx.Family {
	if r, ok := out.(interface{ ServerFamily() (netx.Family, bool) }); ok {
		if f, ok := r.ServerFamily(); ok {
			return f
		}
	}
	if c != nil {
		switch a := c.RemoteAddr().(type) {
		case *net.TCPAddr:
			if a.IP != nil && a.IP.To4() == nil {
				return netx.V6
			}
		case *net.UDPAddr:
			if a.IP != nil && a.IP.To4() == nil {
				return netx.V6
			}
		}
	}
	return netx.V4
}

// dialed reports a real dial of leaf: its latency on success (a pool hit,
// pooled, stays out of the dial-latency average); a failure unless the
// client left, a reload overtook it or the refusal was by route.
func (h healthReports) dialed(ctx context.Context, leaf *plane.Target, c net.Conn, latency time.Duration, pooled bool, err error) {
	e := h.engine()
	if e == nil || leaf == nil {
		return
	}
	id := health.NodeID(leaf.Node())
	if id.IsZero() {
		return
	}
	if err != nil && (ctx.Err() != nil || plane.Reloaded(err) || errors.Is(err, outbound.ErrBlocked)) {
		return
	}
	e.ReportDial(id, familyOf(leaf.Outbound(), c), latency, pooled, err)
}

// ended reports how a relayed flow of leaf ended: a failure on the
// upstream's side counts against the node's TCP path, a clean end for it;
// the client's end, an idle timeout and a stop are neutral.
func (h healthReports) ended(leaf *plane.Target, fam netx.Family, e relay.End) {
	eng := h.engine()
	if eng == nil || leaf == nil {
		return
	}
	id := health.NodeID(leaf.Node())
	if id.IsZero() {
		return
	}
	switch {
	case e.Failure && e.By == relay.EndUpstream:
		eng.ReportTraffic(id, health.TCP, fam, false)
	case !e.Failure && e.Err == nil && (e.By == relay.EndUpstream || e.By == relay.EndClient):
		eng.ReportTraffic(id, health.TCP, fam, true)
	}
}

// PacketPath reports how a leaf's packet path fared in a UDP association
// (fanout.Reporter): an open or receive failure counts against the node's
// DataUdp state, a reply for it.
func (h healthReports) PacketPath(node [16]byte, ok bool) {
	if e := h.engine(); e != nil {
		e.ReportTraffic(health.NodeID(node), health.DataUDP, netx.V4, ok)
	}
}

// interruptFlows closes the flows that went through group's member on
// network: their selection chain names the group, then the member.
func interruptFlows(t *track.Tracker, group, member string, network netx.Network) int {
	return t.Interrupt(func(m track.Meta) bool {
		if m.Network != network {
			return false
		}
		for i := 0; i+1 < len(m.Chain); i++ {
			if m.Chain[i] == group && m.Chain[i+1] == member {
				return true
			}
		}
		return false
	})
}

// startHealth starts the engine's probing, the network watcher that tells
// it of address and route changes, and the saver of last real delays.
func (sv *Supervisor) startHealth() {
	sv.engine.Load().Start()
	sv.bg.Add(1)
	go func() {
		defer sv.bg.Done()
		err := health.WatchNetwork(sv.ctx, func() {
			if e := sv.engine.Load(); e != nil {
				e.NotifyNetworkChange()
			}
		})
		if err != nil && sv.ctx.Err() == nil {
			sv.log.Warn("network changes are not watched: " + err.Error())
		}
	}()
	if st := sv.opts.Store; st != nil {
		sv.bg.Add(1)
		go func() {
			defer sv.bg.Done()
			sv.saveDelays(sv.ctx, st)
		}()
	}
}

// prober is how the engine measures one node: through its own outbound,
// and for the raw connect probe, to its server under the socket policy.
func (sv *Supervisor) prober(deps outbound.Deps, depsErr error, o spec.Outbound, out outbound.Outbound) health.Prober {
	opts := probe.Options{Log: sv.log.With("component", "probe", "node", o.Tag)}
	if p, ok := out.(outbound.Prober); ok {
		opts.Server = p.ProbeTarget()
	}
	if depsErr == nil {
		strategy, _ := netx.ParseStrategy(o.AddressFamily)
		opts.DialTCP = func(ctx context.Context, a netx.Addr) (net.Conn, error) {
			addrs, err := netx.Resolve(ctx, a, strategy, deps.Servers)
			if err != nil {
				return nil, err
			}
			return deps.Dialer.ConnectAny(ctx, addrs)
		}
	}
	return probe.New(out, opts)
}

// ProbeNow runs one probe cycle of every node the groups reach and waits
// for it.
func (sv *Supervisor) ProbeNow() {
	if e := sv.engine.Load(); e != nil {
		e.ProbeNow(sv.ctx)
	}
}

// Health is the health engine in force, for readers (its reads are
// lock-free) and for delay tests.
func (sv *Supervisor) Health() *health.Engine { return sv.engine.Load() }

// NodeID is the node identity of the outbound tag in force.
func (sv *Supervisor) NodeID(tag string) (health.NodeID, bool) {
	ids := sv.nodeIDs.Load()
	if ids == nil {
		return health.NodeID{}, false
	}
	id, ok := (*ids)[tag]
	return id, ok
}
