package supervisor

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

func planSpec() *spec.Spec {
	s := baseSpec()
	s.Inbounds = nil
	return s
}

func depsFor(t *testing.T, s *spec.Spec) outbound.Deps {
	t.Helper()
	d, err := dependencies(s, nil, nil, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// applyPlan prepares s over cur and returns the next state, as commit would
// install it.
func applyPlan(t *testing.T, cur *state, s *spec.Spec) (*prepared, *state) {
	t.Helper()
	p, err := prepare(cur, s, depsFor(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return p, p.next
}

func versionOf(st *state, tag string) uint32 { return st.outbounds[tag].target.ID().Version }

func TestPlanVersions(t *testing.T) {
	s1 := planSpec()
	_, st := applyPlan(t, nil, s1)
	for _, tag := range []string{"direct", "direct2", "block"} {
		if v := versionOf(st, tag); v != 1 {
			t.Fatalf("%s first built at v%d", tag, v)
		}
	}
	direct1 := st.outbounds["direct"].target

	// Unchanged: the running object itself is reused.
	p, st2 := applyPlan(t, st, planSpec())
	if st2.outbounds["direct"].target != direct1 || len(p.plan.drains) != 0 {
		t.Fatal("an unchanged outbound was not reused as the same object")
	}
	if p.plane.Epoch != st.epoch+1 {
		t.Fatalf("epoch %d after %d", p.plane.Epoch, st.epoch)
	}

	// Changed: built at v2, v1 drained with the configured policy.
	s3 := planSpec()
	s3.Outbounds[0].AddressFamily = "ipv4_only"
	s3.Outbounds[0].Drain = spec.DrainClose
	p, st3 := applyPlan(t, st2, s3)
	if v := versionOf(st3, "direct"); v != 2 {
		t.Fatalf("changed outbound at v%d", v)
	}
	if st3.outbounds["direct2"].target != st2.outbounds["direct2"].target {
		t.Fatal("an unrelated outbound was rebuilt")
	}
	if len(p.plan.drains) != 1 || p.plan.drains[0] != (drainStep{tag: "direct", version: 1, policy: spec.DrainClose}) {
		t.Fatalf("drains %+v", p.plan.drains)
	}

	// Removed: drained; added back later, it never reuses a version.
	s4 := planSpec()
	s4.Outbounds = []spec.Outbound{s3.Outbounds[0], s3.Outbounds[2]}
	p, st4 := applyPlan(t, st3, s4)
	if len(p.plan.drains) != 1 || !p.plan.drains[0].removed || p.plan.drains[0].tag != "direct2" || p.plan.drains[0].policy != spec.DrainKeep {
		t.Fatalf("removal drains %+v", p.plan.drains)
	}
	_, st5 := applyPlan(t, st4, planSpec())
	if v := versionOf(st5, "direct2"); v != 2 {
		t.Fatalf("a tag added back got v%d, want v2", v)
	}
}

// wgKey is a valid X25519 key in base64.
const wgKey = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="

// scopeSpec is planSpec with a proxy client and a WireGuard outbound.
func scopeSpec() *spec.Spec {
	s := planSpec()
	s.Outbounds = append(s.Outbounds,
		spec.Outbound{Tag: "up", Type: "socks", AddressFamily: "auto", UDP: true, Server: "127.0.0.1:1080"},
		spec.Outbound{Tag: "wg", Type: "wireguard", AddressFamily: "auto", UDP: true, Endpoint: "127.0.0.1:51820",
			EndpointAddressFamily: "auto", PrivateKey: wgKey, PeerPublicKey: wgKey, MTU: 1408,
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.7.0.2/32")}, AllowedIPs: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}})
	return s
}

var scopeTags = []string{"direct", "direct2", "block", "up", "wg"}

// [dial].max_concurrent_dials belongs to the generation: changing it
// rebuilds no outbound and drains nothing.
func TestAMaxConcurrentDialsChangeReusesEveryOutbound(t *testing.T) {
	_, st := applyPlan(t, nil, scopeSpec())
	s := scopeSpec()
	s.Dial.MaxConcurrentDials = 4
	p, st2 := applyPlan(t, st, s)
	for _, tag := range scopeTags {
		if st2.outbounds[tag].target != st.outbounds[tag].target {
			t.Errorf("%s was rebuilt (v%d) by a max_concurrent_dials change", tag, versionOf(st2, tag))
		}
	}
	if len(p.plan.drains) != 0 {
		t.Fatalf("drains %+v", p.plan.drains)
	}
}

// [dial].connect_timeout is read by the outbounds that connect with it:
// those are rebuilt, block and wireguard are reused.
func TestAConnectTimeoutChangeRebuildsTheOutboundsThatDial(t *testing.T) {
	_, st := applyPlan(t, nil, scopeSpec())
	s := scopeSpec()
	s.Dial.ConnectTimeout = 3 * time.Second
	p, st2 := applyPlan(t, st, s)
	for _, tag := range []string{"direct", "direct2", "up"} {
		if versionOf(st2, tag) != 2 {
			t.Errorf("%s at v%d after a connect_timeout change, want v2", tag, versionOf(st2, tag))
		}
	}
	for _, tag := range []string{"block", "wg"} {
		if st2.outbounds[tag].target != st.outbounds[tag].target {
			t.Errorf("%s was rebuilt by a connect_timeout change", tag)
		}
	}
	if len(p.plan.drains) != 3 {
		t.Fatalf("drains %+v, want direct, direct2 and up", p.plan.drains)
	}
}

// Editing only an outbound's drain key keeps the running version: nothing
// is drained, and the new value is what its flows get at its next drain.
func TestADrainOnlyChangeReusesTheOutbound(t *testing.T) {
	_, st := applyPlan(t, nil, scopeSpec())
	for _, tag := range scopeTags {
		s := scopeSpec()
		i := slices.IndexFunc(s.Outbounds, func(o spec.Outbound) bool { return o.Tag == tag })
		s.Outbounds[i].Drain = spec.DrainClose
		p, st2 := applyPlan(t, st, s)
		if st2.outbounds[tag].target != st.outbounds[tag].target || versionOf(st2, tag) != 1 {
			t.Fatalf("%s: a drain-only change rebuilt it at v%d", tag, versionOf(st2, tag))
		}
		if len(p.plan.drains) != 0 {
			t.Fatalf("%s: a drain-only change drained %+v", tag, p.plan.drains)
		}
		// A later real change, with the drain key unset again: the running
		// version's flows get the drain it was last given.
		s3 := scopeSpec()
		s3.Outbounds[i].AddressFamily = "ipv4_only"
		p, st3 := applyPlan(t, st2, s3)
		if versionOf(st3, tag) != 2 {
			t.Fatalf("%s: a real change left it at v%d", tag, versionOf(st3, tag))
		}
		if len(p.plan.drains) != 1 || p.plan.drains[0] != (drainStep{tag: tag, version: 1, policy: spec.DrainClose}) {
			t.Fatalf("%s: drains %+v, want v1 drained with close", tag, p.plan.drains)
		}
		// Removed instead: the same.
		s4 := scopeSpec()
		s4.Outbounds = slices.Delete(s4.Outbounds, i, i+1)
		if tag == s4.Route.Final {
			s4.Route.Final = "direct2"
		}
		p, _ = applyPlan(t, st2, s4)
		if len(p.plan.drains) != 1 || p.plan.drains[0] != (drainStep{tag: tag, version: 1, policy: spec.DrainClose, removed: true}) {
			t.Fatalf("%s: removal drains %+v, want v1 drained with close", tag, p.plan.drains)
		}
	}
}

// A real change and a drain change together rebuild the outbound, and the
// old version is drained per drainPolicy: the new spec's drain key first.
func TestARealChangeWithADrainChangeRebuildsAndDrainsByTheNewKey(t *testing.T) {
	s1 := scopeSpec()
	s1.Outbounds[3].Drain = spec.DrainClose
	_, st := applyPlan(t, nil, s1)
	s2 := scopeSpec()
	s2.Outbounds[3].Server = "127.0.0.1:1081"
	s2.Outbounds[3].Drain = spec.DrainKeep
	p, st2 := applyPlan(t, st, s2)
	if versionOf(st2, "up") != 2 {
		t.Fatalf("up at v%d, want v2", versionOf(st2, "up"))
	}
	if len(p.plan.drains) != 1 || p.plan.drains[0] != (drainStep{tag: "up", version: 1, policy: spec.DrainKeep}) {
		t.Fatalf("drains %+v, want up@v1 drained with keep", p.plan.drains)
	}
}

// Through Apply: a drain-only change leaves a live flow running on the same
// version, and the next change of that outbound closes it with the new key.
func TestADrainOnlyChangeAppliesAtTheNextDrain(t *testing.T) {
	sv, proxy := run(t, baseSpec(), Options{})
	c1, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	if err := echoOnce(c1, "v1"); err != nil {
		t.Fatal(err)
	}
	s2 := baseSpec()
	s2.Outbounds[0].Drain = spec.DrainClose
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	if id := sv.Plane().Targets["direct"].ID(); id.Version != 1 {
		t.Fatalf("a drain-only change published %s", id)
	}
	if err := echoOnce(c1, "still v1"); err != nil {
		t.Fatalf("a drain-only change ended a flow: %v", err)
	}
	s3 := baseSpec()
	s3.Outbounds[0].AddressFamily = "ipv4_only"
	if err := sv.Apply(s3); err != nil {
		t.Fatal(err)
	}
	c1.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c1.Read(make([]byte, 1)); err == nil || errors.Is(err, errTimeout()) {
		t.Fatalf("v1 drained after drain = close was set is still open: %v", err)
	}
}

// probed is an outbound with a TCP upstream, so it can be a balancer member.
type probed struct {
	outbound.Outbound
	at netx.Addr
}

func (p probed) ProbeTarget() netx.Addr { return p.at }

// CarriesUDP is the wrapped outbound's (outbound.Networks).
func (p probed) CarriesUDP() bool { return outbound.CarriesUDP(p.Outbound) }

// Purge passes on to the wrapped outbound when it keeps connections for
// reuse (outbound.Purger).
func (p probed) Purge() {
	if pg, ok := p.Outbound.(outbound.Purger); ok {
		pg.Purge()
	}
}

func balancerSpec() *spec.Spec {
	s := planSpec()
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "m1", Type: "direct", AddressFamily: "auto", UDP: true}, spec.Outbound{Tag: "m2", Type: "direct", AddressFamily: "auto", UDP: true})
	s.Balancers = []spec.Balancer{{Tag: "pool", Members: []string{"m1", "m2"}, Strategy: "failover", ProbeInterval: time.Hour, ProbeTimeout: time.Second}}
	s.Route.Final = "pool"
	return s
}

// withProbes makes the m1/m2 direct outbounds probeable by wrapping them
// after they are built, as a proxy client would be.
func prepareProbed(t *testing.T, cur *state, s *spec.Spec) (*prepared, error) {
	t.Helper()
	return prepareWith(cur, s, depsFor(t, s), func(o spec.Outbound, out outbound.Outbound) outbound.Outbound {
		if o.Tag == "m1" || o.Tag == "m2" {
			return probed{out, netx.Addr{IP: netip.MustParseAddr("127.0.0.1"), Port: 9}}
		}
		return out
	}, nil)
}

func TestABalancerIsRebuiltExactlyWhenOneOfItsMembersIs(t *testing.T) {
	p, err := prepareProbed(t, nil, balancerSpec())
	if err != nil {
		t.Fatal(err)
	}
	st := p.next
	pool := st.balancers["pool"]
	if pool.version != 1 {
		t.Fatalf("balancer at v%d", pool.version)
	}
	// A non-member changes: the balancer is reused, health and all.
	s2 := balancerSpec()
	s2.Outbounds[1].AddressFamily = "ipv6_only"
	pool.bal.SetHealthy(0, false)
	p2, err := prepareProbed(t, st, s2)
	if err != nil {
		t.Fatal(err)
	}
	if p2.next.balancers["pool"] != pool || pool.bal.Healthy(0) {
		t.Fatal("a balancer was rebuilt though no member changed")
	}
	// A member changes: v2, built fresh (every member healthy), plane republished.
	s3 := balancerSpec()
	s3.Outbounds[3].AddressFamily = "ipv4_only"
	p3, err := prepareProbed(t, p2.next, s3)
	if err != nil {
		t.Fatal(err)
	}
	nb := p3.next.balancers["pool"]
	if nb == pool || nb.version != 2 || !nb.bal.Healthy(0) {
		t.Fatalf("member change: balancer v%d, same object %v", nb.version, nb == pool)
	}
	if p3.plane.Final != nb.target {
		t.Fatal("the new plane does not route to the rebuilt balancer")
	}
}

func TestRemovingABalancerAloneRepublishesThePlane(t *testing.T) {
	p, err := prepareProbed(t, nil, balancerSpec())
	if err != nil {
		t.Fatal(err)
	}
	s2 := balancerSpec()
	s2.Balancers = nil
	s2.Route.Final = "direct"
	p2, err := prepareProbed(t, p.next, s2)
	if err != nil {
		t.Fatal(err)
	}
	if len(p2.plan.drains) != 0 || len(p2.plan.removedBalancers) != 1 {
		t.Fatalf("drains %v, removed %v", p2.plan.drains, p2.plan.removedBalancers)
	}
	if p2.plane.Epoch != p.plane.Epoch+1 || p2.plane.Targets["pool"] != nil {
		t.Fatal("the plane was not republished without the balancer")
	}
	s3 := balancerSpec()
	p3, err := prepareProbed(t, p2.next, s3)
	if err != nil {
		t.Fatal(err)
	}
	if v := p3.next.balancers["pool"].version; v != 2 {
		t.Fatalf("a balancer added back got v%d, want v2", v)
	}
}

func TestABalancerMemberNeedsAProbeableUpstream(t *testing.T) {
	s := balancerSpec()
	_, err := prepare(nil, s, depsFor(t, s))
	if err == nil || err.Error() != "balancer pool: outbound m1 has no upstream a TCP health probe can reach" {
		t.Fatalf("direct member: %v", err)
	}
}

func TestARefusedPrepareLeavesNothing(t *testing.T) {
	_, st := applyPlan(t, nil, planSpec())
	s := planSpec()
	s.Outbounds[1].AddressFamily = "sideways"
	if _, err := prepare(st, s, depsFor(t, s)); err == nil || err.Error() != `building outbound direct2@v2 failed: unknown address family "sideways" (expected auto, ipv4_only, ipv6_only, prefer_ipv4 or prefer_ipv6)` {
		t.Fatalf("refused build: %v", err)
	}
	if versionOf(st, "direct2") != 1 || st.versions["direct2"] != 1 {
		t.Fatal("a refused prepare changed the running versions")
	}
}

// groupSpec has a group "auto" over two outbounds and a group "top" over
// "auto" and a third outbound.
func groupSpec() *spec.Spec {
	s := planSpec()
	s.Groups = []spec.Group{
		{Tag: "top", Policy: "selector", Members: []string{"auto", "block"}, Interrupt: true},
		{Tag: "auto", Policy: "urltest", Members: []string{"direct", "direct2"}, Tolerance: 50 * time.Millisecond},
	}
	return s
}

func groupVersions(p *thePlan) map[string]uint32 {
	m := map[string]uint32{}
	for _, g := range p.groups {
		m[g.spec.Tag] = g.version
	}
	return m
}

// One planner versions every kind in dependency order: a group moves to
// its next version exactly when its spec or anything it reaches does,
// through nesting; an unrelated change leaves it at its version.
func TestAGroupIsRebuiltExactlyWhenAnythingItReachesIs(t *testing.T) {
	p1 := plan(nil, groupSpec())
	st := &state{built: p1.built, versions: p1.versions}
	if v := groupVersions(p1); v["top"] != 1 || v["auto"] != 1 {
		t.Fatalf("first versions %v", v)
	}
	// Unchanged: every group reused.
	p2 := plan(st, groupSpec())
	for _, g := range p2.groups {
		if g.kind != stepReuse || g.version != 1 {
			t.Fatalf("unchanged group %s: %s at v%d", g.spec.Tag, g.kind, g.version)
		}
	}
	// A leaf of "auto" changes: "auto" and "top", which reaches it through
	// "auto", move on.
	s3 := groupSpec()
	s3.Outbounds[1].AddressFamily = "ipv4_only" // direct2
	p3 := plan(st, s3)
	if v := groupVersions(p3); v["auto"] != 2 || v["top"] != 2 {
		t.Fatalf("after a member change: %v", v)
	}
	// Only "top"'s own spec changes: "auto" stays.
	s4 := groupSpec()
	s4.Groups[0].Default = "block"
	p4 := plan(st, s4)
	if v := groupVersions(p4); v["auto"] != 1 || v["top"] != 2 {
		t.Fatalf("after top's own change: %v", v)
	}
	// "block" is reached by "top" only: changing it moves "top" alone.
	s5 := groupSpec()
	s5.Outbounds[2].UDP = !s5.Outbounds[2].UDP
	p5 := plan(st, s5)
	if v := groupVersions(p5); v["auto"] != 1 || v["top"] != 2 {
		t.Fatalf("after a change of top's direct member: %v", v)
	}
}

// Groups that reach each other in a cycle are still planned in one pass,
// and an unchanged cycle is reused.
func TestGroupsInACycleArePlanned(t *testing.T) {
	s := planSpec()
	s.Groups = []spec.Group{
		{Tag: "a", Policy: "fallback", Members: []string{"b", "direct"}},
		{Tag: "b", Policy: "fallback", Members: []string{"a", "direct2"}},
	}
	p1 := plan(nil, s)
	st := &state{built: p1.built, versions: p1.versions}
	p2 := plan(st, s)
	for _, g := range p2.groups {
		if g.kind != stepReuse {
			t.Fatalf("unchanged cyclic group %s rebuilt", g.spec.Tag)
		}
	}
}

// A tag that moves from one kind to another is removed as the old kind and
// built as the new one, at the next version of the tag.
func TestATagThatChangesKind(t *testing.T) {
	s := groupSpec()
	p1 := plan(nil, s)
	st := &state{built: p1.built, versions: p1.versions, groupRuns: map[string]*runGroup{"auto": {}, "top": {}}}
	s2 := groupSpec()
	s2.Groups = s2.Groups[:1]
	s2.Balancers = []spec.Balancer{{Tag: "auto", Members: []string{"direct", "direct2"}, Strategy: "failover"}}
	p2 := plan(st, s2)
	if len(p2.removedGroups) != 1 || p2.removedGroups[0] != "auto" {
		t.Fatalf("removed groups %v", p2.removedGroups)
	}
	if len(p2.balancers) != 1 || p2.balancers[0].kind != stepBuild || p2.balancers[0].version != 2 {
		t.Fatalf("balancers %+v", p2.balancers)
	}
	if v := groupVersions(p2); v["top"] != 2 {
		t.Fatalf("top, which reaches the tag, at v%d", v["top"])
	}
}

// What an outbound carries survives the wrappers the supervisor's test hook
// puts around it: a member made probeable, or closable, still says whether
// it carries UDP.
func TestWrappedOutboundsKeepTheirNetworks(t *testing.T) {
	s := planSpec()
	s.Outbounds[1].UDP = false // direct2
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "h", Type: "http", Server: "127.0.0.1:3128", AddressFamily: "auto", UDP: true})
	want := map[string]bool{"direct": true, "direct2": false, "block": true, "h": false}
	for name, wrap := range map[string]func(spec.Outbound, outbound.Outbound) outbound.Outbound{
		"probed": func(_ spec.Outbound, out outbound.Outbound) outbound.Outbound {
			return probed{out, netx.Addr{IP: netip.MustParseAddr("127.0.0.1"), Port: 9}}
		},
		"closable": func(_ spec.Outbound, out outbound.Outbound) outbound.Outbound { return &closable{inner: out} },
	} {
		p, err := prepareWith(nil, s, depsFor(t, s), wrap, nil)
		if err != nil {
			t.Fatal(err)
		}
		for tag, carries := range want {
			if got := outbound.CarriesUDP(p.next.outbounds[tag].target.Outbound()); got != carries {
				t.Errorf("%s %s: CarriesUDP = %v, want %v", name, tag, got, carries)
			}
		}
	}
}

// A change of [dns] rebuilds every outbound but block, which resolves
// nothing.
func TestADNSChangeRebuildsEveryOutboundButBlock(t *testing.T) {
	_, st := applyPlan(t, nil, planSpec())
	s2 := planSpec()
	s2.DNS = &spec.DNS{Servers: []string{"udp://127.0.0.1:53"}}
	p := plan(st, s2)
	for _, o := range p.outbounds {
		want := stepBuild
		if o.spec.Type == "block" {
			want = stepReuse
		}
		if o.kind != want {
			t.Fatalf("%s: %s after a [dns] change, want %s", o.spec.Tag, o.kind, want)
		}
	}
}
