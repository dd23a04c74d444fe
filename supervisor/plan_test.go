package supervisor

import (
	"log/slog"
	"net/netip"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
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
	if st3.outbounds["direct2"] != st2.outbounds["direct2"] {
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

func TestChangedDialDepsRebuildEveryOutboundButBlock(t *testing.T) {
	_, st := applyPlan(t, nil, planSpec())
	s := planSpec()
	s.Dial.ConnectTimeout = 3 * time.Second
	_, st2 := applyPlan(t, st, s)
	if versionOf(st2, "direct") != 2 || versionOf(st2, "direct2") != 2 {
		t.Fatal("a changed dial spec did not rebuild the outbounds that dial")
	}
	if st2.outbounds["block"] != st.outbounds["block"] {
		t.Fatal("block was rebuilt by a dial change")
	}
}

// probed is an outbound with a TCP upstream, so it can be a balancer member.
type probed struct {
	outbound.Outbound
	at netx.Addr
}

func (p probed) ProbeTarget() netx.Addr { return p.at }

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
	})
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
