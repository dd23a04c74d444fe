package supervisor

import (
	"context"
	"errors"
	"fmt"

	mdns "github.com/miekg/dns"

	"switchyard/dns"
	"switchyard/dns/fakeip"
	"switchyard/dns/serve"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/direct"
	"switchyard/outbound/dnsout"
	"switchyard/plane"
	"switchyard/spec"
	"switchyard/store"
)

// dnsRuntime is what one [dns] table runs: its resolvers (the proxy
// servers' and the destinations'), the DNS service over the destinations'
// router, the service as an outbound (the "dns" type, and the target the
// plane's port-53 interception sends to when serve is on) and the fake IP
// table. A reload that keeps [dns] keeps it whole; one that changes it
// builds the next one, and every outbound but block with it.
type dnsRuntime struct {
	spec   *spec.DNS
	set    *dns.Set
	svc    *serve.Service
	out    outbound.Outbound
	target *plane.Target // the interception target; nil unless Serve
	fake   *fakeip.Table // nil without [dns.fakeip]
}

// dnsFor is the DNS runtime a generation of s uses: the running one while
// [dns] is unchanged, a new one (not yet in force) otherwise, nil without
// [dns].
func (sv *Supervisor) dnsFor(s *spec.Spec) (*dnsRuntime, error) {
	if s.DNS == nil {
		return nil, nil
	}
	if cur := sv.dnsRT; cur != nil && spec.Equal(cur.spec, s.DNS) {
		return cur, nil
	}
	return sv.buildDNS(s)
}

// buildDNS builds the runtime of s.DNS; it opens no socket.
func (sv *Supervisor) buildDNS(s *spec.Spec) (*dnsRuntime, error) {
	policy, err := netx.NewSocketPolicy(sv.socket.Mark, sv.socket.Interface, sv.socket.BindAddresses, sv.socket.TCPKeepAliveIdle)
	if err != nil {
		return nil, err
	}
	policy.Hook = sv.opts.SocketHook
	env := dns.Env{
		Direct: dns.PolicyDialer(netx.NewDialer(policy, s.Dial.ConnectTimeout)),
		Logger: sv.log.With("component", "dns"),
	}
	if len(s.DNS.ThroughProxy) > 0 {
		env.Routed = routedDialer{conn: sv.conn}
	}
	set, err := dns.Build(s.DNS, env)
	if err != nil {
		return nil, err
	}
	rt := &dnsRuntime{spec: s.DNS, set: set}
	opts := serve.Options{Timeout: s.DNS.Timeout, Logger: sv.log.With("component", "dns-service")}
	if f := s.DNS.FakeIP; f != nil {
		rt.fake, err = fakeip.New(fakeip.Config{IPv4: f.IPv4, IPv6: f.IPv6, Size: f.Size, Filter: f.Filter})
		if err != nil {
			set.Close()
			return nil, fmt.Errorf("dns.fakeip: %w", err)
		}
		sv.restoreFakeIPs(rt.fake)
		opts.FakeIP = fakeip.Answerer(rt.fake, sv.proxied)
	}
	rt.svc = serve.New(set.Exchanger(), opts)
	rt.out = dnsout.New(rt.svc)
	if s.DNS.Serve {
		sv.dnsVersion++
		rt.target = plane.NewTarget(plane.OutboundID{Tag: "", Version: sv.dnsVersion}, rt.out)
	}
	return rt, nil
}

// close releases the runtime's resolvers.
func (rt *dnsRuntime) close() {
	if rt != nil {
		rt.set.Close()
	}
}

// attach puts the runtime's interception target and fake IP table on the
// generation's plane.
func (rt *dnsRuntime) attach(pl *plane.Plane) {
	if rt == nil {
		return
	}
	if rt.target != nil {
		pl.DNS = rt.target
	}
	if rt.fake != nil {
		pl.FakeIPs = rt.fake
	}
}

// withDNS gives deps the runtime's resolvers and service.
func (rt *dnsRuntime) withDNS(deps outbound.Deps) outbound.Deps {
	if rt != nil {
		deps.Servers, deps.Destinations, deps.DNS = rt.set.Servers(), rt.set.Destinations(), rt.out
	}
	return deps
}

// proxied reports whether a flow to name would leave through a proxy on
// the plane now in force: a fake address is answered only for those (a
// name sent direct gets its real address, which the direct outbound would
// reach anyway).
func (sv *Supervisor) proxied(name string) bool {
	p := sv.cell.Load()
	if p == nil {
		return false
	}
	f := netx.Flow{Network: netx.TCP, Dst: netx.Addr{Name: name, Port: 443}}
	target, _ := p.Route(&f)
	var q plane.Query
	q.Network, q.Dst, q.Peek = netx.TCP, f.Dst, true
	leaf := target.Resolve(&q)
	if leaf == nil {
		return false
	}
	switch leaf.Outbound().(type) {
	case *direct.Outbound, *dnsout.Outbound:
		return false
	}
	return leaf.ID().Tag != "block"
}

// restoreFakeIPs loads the mappings the store kept into t.
func (sv *Supervisor) restoreFakeIPs(t *fakeip.Table) {
	st := sv.opts.Store
	if st == nil {
		return
	}
	ms := st.FakeIPs()
	if len(ms) == 0 {
		return
	}
	out := make([]fakeip.Mapping, len(ms))
	for i, m := range ms {
		out[i] = fakeip.Mapping{Name: m.Name, V4: m.V4, V6: m.V6, LastUsed: m.LastUsed}
	}
	n := t.Restore(out)
	sv.log.Debug("fake IP mappings restored", "mappings", n)
}

// saveFakeIPs writes the running fake IP table to the store.
func (sv *Supervisor) saveFakeIPs(st *store.Store) {
	rt := sv.dnsCur.Load()
	if rt == nil || rt.fake == nil {
		return
	}
	ms := rt.fake.Snapshot()
	out := make([]store.FakeIPMapping, len(ms))
	for i, m := range ms {
		out[i] = store.FakeIPMapping{Name: m.Name, V4: m.V4, V6: m.V6, LastUsed: m.LastUsed}
	}
	st.SetFakeIPs(out)
}

// DNSStats are the counters of the DNS runtime in force: each resolver's
// queries, cache hits, failures and latency, and the service's answers by
// rcode. ok is false without [dns].
func (sv *Supervisor) DNSStats() (resolvers []dns.Stats, service serve.Stats, ok bool) {
	rt := sv.dnsCur.Load()
	if rt == nil {
		return nil, serve.Stats{}, false
	}
	return rt.set.Stats(), rt.svc.Stats(), true
}

// FlushDNS empties the DNS cache in force.
func (sv *Supervisor) FlushDNS() {
	if rt := sv.dnsCur.Load(); rt != nil {
		rt.set.Flush()
	}
}

// QueryDNS asks name (of type qtype) as a client of the DNS service would:
// through the destinations' router, the DNS rules and the cache. It fails
// without [dns].
func (sv *Supervisor) QueryDNS(ctx context.Context, name string, qtype uint16) (*mdns.Msg, error) {
	rt := sv.dnsCur.Load()
	if rt == nil {
		return nil, errors.New("no [dns] table: names go to the system resolver")
	}
	q := new(mdns.Msg)
	q.SetQuestion(mdns.Fqdn(name), qtype)
	return rt.set.Exchanger().Exchange(ctx, q)
}

// HasDNS reports whether a [dns] table is in force.
func (sv *Supervisor) HasDNS() bool { return sv.dnsCur.Load() != nil }

// FlushFakeIPs forgets every fake IP mapping; ok is false without fake IPs.
func (sv *Supervisor) FlushFakeIPs() (dropped int, ok bool) {
	rt := sv.dnsCur.Load()
	if rt == nil || rt.fake == nil {
		return 0, false
	}
	n := rt.fake.Flush()
	sv.log.Info("fake IP mappings flushed", "mappings", n)
	return n, true
}
