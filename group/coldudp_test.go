package group_test

import (
	"testing"

	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
)

// cold returns the tags and chains of the cold UDP candidates of the route
// target tag for family f.
func (e *env) cold(tag string, f netx.Family) ([]string, [][]string) {
	e.t.Helper()
	q := plane.Query{Network: netx.UDP, Family: f}
	var tags []string
	var chains [][]string
	for _, c := range e.m.Target(tag).ColdCandidates(&q) {
		tags = append(tags, c.Leaf.ID().Tag)
		chains = append(chains, c.Chain)
	}
	return tags, chains
}

// An unmeasured URLTest route target names every eligible UDP leaf, in
// its ranking order: members carrying strikes last, otherwise declaration
// order; the excluded ones (dead on UDP, unable to carry it) are left out,
// and a leaf reached twice is named once.
func TestAColdURLTestNamesItsEligibleLeavesInRankingOrder(t *testing.T) {
	ls := leaves("a", "b", "c", "d", "e")
	noUDP := ls["d"]
	noUDP.UDP = false
	ls["d"] = noUDP
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b", "c", "d", "e", "inner"), auto("fallback", "inner", "e", "c")}, ls)
	e.h.strike("a", 1)
	e.h.set("c", health.DataUDP, netx.V4, false)
	e.h.set("c", health.DNSUDP, netx.V4, false)
	tags, chains := e.cold("u", netx.V4)
	if !equal(tags, []string{"b", "e", "a"}) {
		t.Fatalf("candidates %v, want [b e a]", tags)
	}
	if !equal(chains[0], []string{"u", "b"}) {
		t.Fatalf("chain %v", chains[0])
	}
	// The family is the flow's: on IPv6 c is not UDP-dead.
	if tags, _ := e.cold("u", netx.V6); !equal(tags, []string{"b", "c", "e", "a"}) {
		t.Fatalf("IPv6 candidates %v, want [b c e a]", tags)
	}
}

// A block member is a terminal action, never raced: left out after a real
// first pick, and authoritative as the first pick.
func TestABlockMemberIsNoColdCandidate(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "block", "b"), auto("urltest", "bf", "block", "a", "b")}, leaves("a", "b", "block"))
	if tags, _ := e.cold("u", netx.V4); !equal(tags, []string{"a", "b"}) {
		t.Fatalf("candidates %v, want [a b]", tags)
	}
	if tags, _ := e.cold("bf", netx.V4); tags != nil {
		t.Fatalf("block first: candidates %v, want none", tags)
	}
}

// A sub-group member is one candidate, the leaf its own policy picks, with
// the chain through it.
func TestAColdCandidateThroughASubGroupCarriesItsChain(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "inner", "b"), auto("fallback", "inner", "a", "c")}, leaves("a", "b", "c"))
	tags, chains := e.cold("u", netx.V4)
	if !equal(tags, []string{"a", "b"}) || !equal(chains[0], []string{"u", "inner", "a"}) {
		t.Fatalf("candidates %v, chains %v", tags, chains)
	}
}

// Real ranking evidence of any eligible member, in DataUdp, DnsUdp or TCP
// (or the group's check_url), makes the group's pick authoritative: no
// candidates. So do TCP, another policy, a URLTest nested under a
// Selector, and a single candidate. Strikes alone are no evidence.
func TestOnlyAnUnmeasuredTopLevelURLTestPrepares(t *testing.T) {
	groups := []spec.Group{auto("urltest", "u", "a", "b"), sel("s", "u", "a"), auto("fallback", "f", "a", "b"), auto("urltest", "one", "a")}
	for _, d := range []health.Domain{health.DataUDP, health.DNSUDP, health.TCP} {
		e := build(t, groups, leaves("a", "b"))
		e.h.strike("a", 2)
		if tags, _ := e.cold("u", netx.V4); len(tags) != 2 {
			t.Fatalf("unmeasured, with strikes: candidates %v", tags)
		}
		e.h.latency("b", d, 40)
		if tags, _ := e.cold("u", netx.V4); tags != nil {
			t.Fatalf("b measured on %v: candidates %v, want none", d, tags)
		}
	}
	e := build(t, groups, leaves("a", "b"))
	// Evidence of an ineligible member is no evidence.
	e.h.latency("b", health.TCP, 40)
	e.h.kill("b")
	if tags, _ := e.cold("u", netx.V4); tags != nil {
		t.Fatalf("one eligible candidate left: %v", tags)
	}
	e.h.revive("b")
	for _, tag := range []string{"s", "f", "one"} {
		if tags, _ := e.cold(tag, netx.V4); tags != nil {
			t.Fatalf("%s: candidates %v, want none", tag, tags)
		}
	}
	q := plane.Query{Network: netx.TCP, Family: netx.V4}
	if c := e.m.Target("u").ColdCandidates(&q); c != nil {
		t.Fatalf("TCP: candidates %v", c)
	}

	g := auto("urltest", "checked", "a", "b")
	g.CheckURL = "http://check.example/"
	e = build(t, []spec.Group{g}, leaves("a", "b"))
	e.h.url("a", g.CheckURL, 30, true)
	if tags, _ := e.cold("checked", netx.V4); tags != nil {
		t.Fatalf("a measured by the group's check_url: candidates %v", tags)
	}
}

// ColdEligible rechecks a winner against the group's current state.
func TestColdEligibleFollowsHealth(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b")}, leaves("a", "b", "c"))
	q := plane.Query{Network: netx.UDP, Family: netx.V4}
	pr := e.m.Target("u")
	c := pr.ColdCandidates(&q)
	if len(c) != 2 {
		t.Fatalf("candidates %v", c)
	}
	if !pr.ColdEligible(&q, c[1].Leaf) {
		t.Fatal("b ineligible while alive")
	}
	e.h.set("b", health.DataUDP, netx.V4, false)
	e.h.set("b", health.DNSUDP, netx.V4, false)
	if pr.ColdEligible(&q, c[1].Leaf) {
		t.Fatal("b eligible with both UDP domains dead")
	}
	if pr.ColdEligible(&q, e.leaves["c"].Target) {
		t.Fatal("a non-member eligible")
	}
}

// While the group is cold, an association keeps the leaf its preparation
// chose (Query.Prefer) instead of the group's unmeasured first pick; once
// the group is measured its ranking decides again.
func TestAColdGroupKeepsTheAssociationsPreparedLeaf(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b"), sel("s", "u")}, leaves("a", "b"))
	b := e.leaves["b"].Target.ID()
	if got, _ := resolve(t, e.m.Target("u"), netx.UDP, netx.V4, nil); got != "a" {
		t.Fatalf("no preference: %s", got)
	}
	if got, _ := resolve(t, e.m.Target("u"), netx.UDP, netx.V4, &b); got != "b" {
		t.Fatalf("cold, preferring b: %s", got)
	}
	// Nested under a Selector the group prepares nothing, and keeps no
	// preference of its own.
	if got, _ := resolve(t, e.m.Target("s"), netx.UDP, netx.V4, &b); got != "a" {
		t.Fatalf("nested, preferring b: %s", got)
	}
	if got, _ := resolve(t, e.m.Target("u"), netx.TCP, netx.V4, &b); got != "a" {
		t.Fatalf("TCP, preferring b: %s", got)
	}
	e.h.latency("a", health.DataUDP, 20)
	e.h.latency("b", health.DataUDP, 90)
	if got, _ := resolve(t, e.m.Target("u"), netx.UDP, netx.V4, &b); got != "a" {
		t.Fatalf("measured, preferring b: %s (the ranking decides)", got)
	}
}

// Keeping the prepared leaf costs a cold group's packets no allocation.
func TestAColdPreferredSelectionAllocatesNothing(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b", "c")}, leaves("a", "b", "c"))
	prefer := e.leaves["c"].Target.ID()
	q := plane.Query{Network: netx.UDP, Prefer: &prefer}
	target := e.m.Target("u")
	if l := target.Resolve(&q); l == nil || l.ID() != prefer {
		t.Fatalf("resolved %v", l)
	}
	if a := testing.AllocsPerRun(100, func() { target.Resolve(&q) }); a != 0 {
		t.Fatalf("%v allocations per selection", a)
	}
}
