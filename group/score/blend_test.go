package score_test

import (
	"testing"

	"switchyard/group/score"
	"switchyard/netx"
)

func TestHierarchicalBlending(t *testing.T) {
	h := newHarness(t, 1)
	good, bad, cold := scope(target(1), 1), scope(target(2), 1), scope(target(3), 1)
	for range 30 {
		h.useful(good)
	}
	// A cold target reads the aggregate prior.
	vc, vg := h.view(cold), h.view(good)
	if vc.Exact.Present || !near(vc.Rate, 31.0/32) {
		t.Fatalf("cold target rate %v, want the aggregate's %v", vc.Rate, 31.0/32)
	}
	if !near(vg.Rate, 31.0/32) || !near(vg.Support, 30) {
		t.Fatalf("good target %+v", vg)
	}
	// Sparse exact evidence moves the view only part of the way.
	h.fail(bad, score.FlowIO)
	h.fail(bad, score.FlowIO)
	v := h.view(bad)
	aggS, aggF := v.Global.Successes, v.Global.Failures
	w := 2 / score.BlendThreshold
	want := (1 + (1-w)*aggS) / (2 + (1-w)*aggS + (1-w)*aggF + w*2)
	if !near(v.Rate, want) {
		t.Fatalf("sparse exact: rate %v, want %v", v.Rate, want)
	}
	// At BlendThreshold outcomes the exact layer stands alone.
	for range int(score.BlendThreshold) - 2 {
		h.fail(bad, score.FlowIO)
	}
	v = h.view(bad)
	if v.Exact.Failures < score.BlendThreshold-0.01 {
		t.Fatalf("exact failures %v", v.Exact.Failures)
	}
	if alone := 1 / (2 + v.Exact.Failures); !near(v.Rate, alone) {
		t.Errorf("mature exact: rate %v, want exact alone %v", v.Rate, alone)
	}
	// Support is the largest layer's successes, never the sum.
	if !near(v.Support, v.Global.Successes) || v.Support >= v.Global.Successes+v.Family.Successes {
		t.Errorf("support %v", v.Support)
	}
}

// The family layer sits between the global aggregate and the exact target:
// an IPv6 target reads the IPv6 family, an IPv4 one the IPv4 family.
func TestFamilyLayer(t *testing.T) {
	h := newHarness(t, 1)
	v6 := scope(netx.DomainAddr("six.example", 443), 1)
	v6.Family = netx.V6
	for range 10 {
		h.fail(v6, score.FlowIO)
	}
	v4 := scope(target(1), 1)
	for range 10 {
		h.useful(v4)
	}
	cold4, cold6 := scope(target(2), 1), scope(netx.DomainAddr("other.example", 443), 1)
	cold6.Family = netx.V6
	a, b := h.view(cold4), h.view(cold6)
	if !(a.Rate > 0.8 && b.Rate < 0.2) {
		t.Fatalf("family priors: v4 %v, v6 %v", a.Rate, b.Rate)
	}
	if !near(a.Global.Attempts, 20) || !near(a.Family.Attempts, 10) {
		t.Errorf("layers %+v %+v", a.Global, a.Family)
	}
}
