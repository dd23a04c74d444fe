package group_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"switchyard/balancer"
	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
)

func TestASubGroupContributesTheOneLeafItsOwnPolicyPicks(t *testing.T) {
	e := build(t, []spec.Group{
		auto("fallback", "top", "inner", "c"),
		sel("inner", "a", "b"),
	}, leaves("a", "b", "c"))
	if _, err := e.m.Select("inner", "b"); err != nil {
		t.Fatal(err)
	}
	leaf, chain := e.pick("top", netx.TCP, netx.V4)
	if leaf != "b" || !equal(chain, []string{"top", "inner", "b"}) {
		t.Fatalf("top resolves to %q via %v, want b via [top inner b]", leaf, chain)
	}
	// The selector's choice dead: inner has no pick, so top takes c, not a.
	e.h.kill("b")
	if leaf, chain := e.pick("top", netx.TCP, netx.V4); leaf != "c" || !equal(chain, []string{"top", "c"}) {
		t.Fatalf("with inner's choice dead top resolves to %q via %v, want c via [top c]", leaf, chain)
	}
}

func TestConstructionCutsEveryCycleClosingEdgeWithAWarning(t *testing.T) {
	e := build(t, []spec.Group{
		auto("fallback", "a", "b", "x"),
		auto("fallback", "b", "a", "y"),
		withFinal(auto("fallback", "c", "x"), "d"),
		withFinal(auto("fallback", "d", "y"), "c"),
	}, leaves("x", "y"))
	want := []string{
		`group "b": member "a" closes the cycle a -> b -> a; the edge is cut`,
		`group "d": final "c" closes the cycle c -> d -> c; the edge is cut`,
	}
	if !equal(e.warnings, want) {
		t.Fatalf("warnings %q, want %q", e.warnings, want)
	}
	if e.logs.count("closes the cycle") != 2 {
		t.Fatal("the cycle warnings were not logged")
	}
	// The cut member stays listed and is excluded as a cut cycle.
	if got := e.m.NodeNames("b"); !equal(got, []string{"a", "y"}) {
		t.Fatalf("b lists %v", got)
	}
	x := e.m.Explain("b", netx.TCP, netx.V4)
	if c := x.Candidates[0]; c.Eligible || c.Excluded != group.ExclusionCut || c.Why != "cut cycle" {
		t.Fatalf("b's member a: %+v", c)
	}
	if e.tcp("b") != "y" || e.tcp("a") != "y" {
		t.Fatalf("b -> %q, a -> %q; want y through the uncut edges", e.tcp("b"), e.tcp("a"))
	}
	// d's cut final is a refusal: with y dead d refuses, while c still
	// follows its final d... which refuses too.
	e.h.kill("y")
	if l := e.tcp("d"); l != "" {
		t.Fatalf("d with a cut final resolved to %q", l)
	}
	want = []string{`no eligible member, and the final "c" names nothing or closes a cycle: flows are refused`}
	if x := e.m.Explain("d", netx.TCP, netx.V4); x.Reason != group.ReasonRefused || x.Sentence != want[0] {
		t.Fatalf("d explains %q %q", x.Reason, x.Sentence)
	}
}

// chain9 is nine nested selectors g1 -> g2 -> ... -> g9 -> leaf.
func chain9() []spec.Group {
	var gs []spec.Group
	for i := 1; i <= 9; i++ {
		next := fmt.Sprintf("g%d", i+1)
		if i == 9 {
			next = "leaf"
		}
		gs = append(gs, sel(fmt.Sprintf("g%d", i), next))
	}
	return gs
}

func TestEightNestedGroupsResolveAndANinthIsRefusedCleanly(t *testing.T) {
	e := build(t, chain9(), leaves("leaf"))
	want := `group "g1": nesting is 9 groups deep, deeper than 8; selection through it refuses what lies below the 8th`
	if !equal(e.warnings, []string{want}) {
		t.Fatalf("warnings %q, want [%q]", e.warnings, want)
	}
	leaf, chain := e.pick("g2", netx.TCP, netx.V4)
	if leaf != "leaf" || len(chain) != 9 || chain[0] != "g2" || chain[8] != "leaf" {
		t.Fatalf("g2 (8 groups deep) resolves to %q via %v", leaf, chain)
	}
	for _, n := range []netx.Network{netx.TCP, netx.UDP} {
		if leaf, _ := e.pick("g1", n, netx.V4); leaf != "" {
			t.Fatalf("g1 (9 groups deep) resolved %v to %q", n, leaf)
		}
	}
	x := e.m.Explain("g8", netx.TCP, netx.V4)
	if x.Leaf != "leaf" {
		t.Fatalf("g8 explains %+v", x)
	}
	if got := e.m.SelectionChain("g1", netx.TCP); got != nil {
		t.Fatalf("g1's chain is %v, want nil", got)
	}
}

func TestTCPEligibilityIsTCPLivenessOfTheQueriedFamily(t *testing.T) {
	e := build(t, []spec.Group{auto("fallback", "fb", "a", "b")}, leaves("a", "b"))
	e.h.set("a", health.TCP, netx.V6, false)
	if l := e.tcp("fb"); l != "a" {
		t.Fatalf("V4 query with a dead only on V6 -> %q, want a", l)
	}
	if l, _ := e.pick("fb", netx.TCP, netx.V6); l != "b" {
		t.Fatalf("V6 query with a dead on V6 -> %q, want b", l)
	}
	e.h.set("a", health.TCP, netx.V4, false)
	if l := e.tcp("fb"); l != "b" {
		t.Fatalf("a dead on V4 -> %q, want b", l)
	}
}

func TestUDPExcludesLeavesThatCannotCarryUDPBeforeAnyHealth(t *testing.T) {
	ls := leaves("vmess", "ss")
	l := ls["vmess"]
	l.UDP = false
	ls["vmess"] = l
	e := build(t, []spec.Group{auto("fallback", "fb", "vmess", "ss")}, ls)
	if got := e.udp("fb"); got != "ss" {
		t.Fatalf("UDP -> %q, want ss: vmess cannot carry UDP though its TCP is alive", got)
	}
	if got := e.tcp("fb"); got != "vmess" {
		t.Fatalf("TCP -> %q, want vmess", got)
	}
	x := e.m.Explain("fb", netx.UDP, netx.V4)
	if c := x.Candidates[0]; c.Excluded != group.ExclusionNoUDP || c.Why != "cannot carry UDP" {
		t.Fatalf("vmess for UDP: %+v", c)
	}
}

func TestUDPEligibilityFollowsUDPStateThenTCP(t *testing.T) {
	// One member and a final: no pin to hold across the changes.
	e := build(t, []spec.Group{withFinal(auto("fallback", "fb", "a"), "b")}, leaves("a", "b"))
	// No UDP state: TCP liveness decides.
	e.h.kill("a")
	if got := e.udp("fb"); got != "b" {
		t.Fatalf("a without UDP state and TCP dead -> %q, want b", got)
	}
	// DataUDP alive: eligible whatever TCP says.
	e.h.set("a", health.DataUDP, netx.V4, true)
	if got := e.udp("fb"); got != "a" {
		t.Fatalf("a with DataUDP alive -> %q, want a", got)
	}
	// Both UDP domains explicitly dead: excluded although TCP is alive.
	e.h.revive("a")
	e.h.set("a", health.DataUDP, netx.V4, false)
	e.h.set("a", health.DNSUDP, netx.V4, false)
	e.m.NodeChanged(node("a", 1))
	if got := e.udp("fb"); got != "b" {
		t.Fatalf("a with both UDP domains dead -> %q, want b", got)
	}
	x := e.m.Explain("fb", netx.UDP, netx.V4)
	if c := x.Candidates[0]; c.Excluded != group.ExclusionUDPDead || c.Why != "both UDP domains dead on udp4" {
		t.Fatalf("a for UDP: %+v", c)
	}
}

func TestBlockIsTerminalForBothNetworks(t *testing.T) {
	e := build(t, []spec.Group{sel("s", "a", "block")}, leaves("a", "block"))
	if _, err := e.m.Select("s", "block"); err != nil {
		t.Fatal(err)
	}
	e.h.set("", health.TCP, netx.V4, false) // whatever health says of no node
	if e.tcp("s") != "block" || e.udp("s") != "block" {
		t.Fatalf("a selector choosing block -> tcp %q udp %q", e.tcp("s"), e.udp("s"))
	}
}

func TestAnIPv6RetryPrefersAnIPv4PathBeforeTheFinal(t *testing.T) {
	e := build(t, []spec.Group{withFinal(auto("fallback", "fb", "a"), "direct")}, leaves("a", "direct"))
	e.h.set("a", health.TCP, netx.V6, false)
	if l, _ := e.pick("fb", netx.TCP, netx.V6); l != "a" {
		t.Fatalf("V6 retry with a alive on V4 -> %q, want a (before the final)", l)
	}
	x := e.m.Explain("fb", netx.TCP, netx.V6)
	if x.Reason != group.ReasonIPv4 || x.Winner != "a" {
		t.Fatalf("V6 explanation %+v", x)
	}
	e.h.set("a", health.TCP, netx.V4, false)
	if l, chain := e.pick("fb", netx.TCP, netx.V6); l != "direct" || !equal(chain, []string{"fb", "direct"}) {
		t.Fatalf("V6 retry with a dead on both -> %q via %v, want the final direct", l, chain)
	}
}

func TestFinalsAreOutboundsBalancersOrGroupsResolvedThroughTheSameWalk(t *testing.T) {
	ls := leaves("a", "b", "direct")
	bal := newBalancer(t, ls, "b")
	groups := []spec.Group{
		withFinal(auto("fallback", "to-leaf", "a"), "direct"),
		withFinal(auto("fallback", "to-group", "a"), "rescue"),
		withFinal(auto("fallback", "to-bal", "a"), "pool"),
		sel("rescue", "b"),
		withFinal(auto("fallback", "missing", "a"), "nowhere"),
	}
	h := newHealth()
	m, warnings, err := group.New(groups, nil, ls, map[string]*plane.Target{"pool": bal}, group.Options{Health: h})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want := `group "missing": final "nowhere" names no outbound, balancer or group; flows with no eligible member are refused`
	if !equal(warnings, []string{want}) {
		t.Fatalf("warnings %q", warnings)
	}
	h.kill("a")
	for _, c := range []struct {
		group string
		leaf  string
		chain []string
	}{
		{"to-leaf", "direct", []string{"to-leaf", "direct"}},
		{"to-group", "b", []string{"to-group", "rescue", "b"}},
		{"to-bal", "b", []string{"to-bal", "pool", "b"}},
		{"missing", "", nil},
	} {
		leaf, chain := resolve(t, m.Target(c.group), netx.TCP, netx.V4, nil)
		if leaf != c.leaf || !equal(chain, c.chain) {
			t.Errorf("%s -> %q via %v, want %q via %v", c.group, leaf, chain, c.leaf, c.chain)
		}
	}
	if x := m.Explain("to-group", netx.TCP, netx.V4); x.Reason != group.ReasonFinal || x.Final != "rescue" ||
		x.Sentence != `no eligible member: following final "rescue"` {
		t.Fatalf("to-group explains %+v", x)
	}
}

func newBalancer(t *testing.T, ls map[string]group.Leaf, tags ...string) *plane.Target {
	t.Helper()
	var ms []balancer.Member
	for _, tag := range tags {
		ms = append(ms, balancer.Member{Target: ls[tag].Target, Probe: netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 443}})
	}
	b, err := balancer.New("pool", ms, balancer.Failover, nil)
	if err != nil {
		t.Fatal(err)
	}
	return plane.NewChooserTarget(plane.OutboundID{Tag: "pool", Version: 1}, b)
}

func TestABalancerMemberIsAlwaysEligibleAndYieldsItsOwnLeaf(t *testing.T) {
	ls := leaves("a", "b")
	bal := newBalancer(t, ls, "b")
	h := newHealth()
	m, _, err := group.New([]spec.Group{auto("urltest", "u", "a", "pool")}, nil, ls, map[string]*plane.Target{"pool": bal}, group.Options{Health: h})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h.kill("a")
	h.kill("b") // the balancer's own probes, not the groups' health, decide its members
	leaf, chain := resolve(t, m.Target("u"), netx.TCP, netx.V4, nil)
	if leaf != "b" || !equal(chain, []string{"u", "pool", "b"}) {
		t.Fatalf("u -> %q via %v, want b via [u pool b]", leaf, chain)
	}
	if got := m.SelectionChain("u", netx.TCP); !equal(got, []string{"u", "pool"}) {
		t.Fatalf("u's chain %v: it ends at the balancer", got)
	}
}

func TestTheLastResortServesTheOnlyLeafForTCPOnly(t *testing.T) {
	e := build(t, []spec.Group{
		sel("one", "a"),
		sel("outer", "inner"),
		auto("urltest", "inner", "a"),
		withFinal(sel("with-final", "a"), "direct"),
		auto("fallback", "two", "a", "b"),
	}, leaves("a", "b", "direct"))
	e.h.kill("a")
	e.h.kill("b")
	if l, chain := e.pick("one", netx.TCP, netx.V4); l != "a" || !equal(chain, []string{"one", "a"}) {
		t.Fatalf("one -> %q via %v, want the last resort a", l, chain)
	}
	if l := e.udp("one"); l != "" {
		t.Fatalf("one over UDP -> %q: UDP keeps normal exclusion", l)
	}
	if l, chain := e.pick("outer", netx.TCP, netx.V4); l != "a" || !equal(chain, []string{"outer", "inner", "a"}) {
		t.Fatalf("outer -> %q via %v, want a through the nested choices", l, chain)
	}
	if l := e.tcp("with-final"); l != "direct" {
		t.Fatalf("with-final -> %q: a group with a final has no last resort", l)
	}
	if l := e.tcp("two"); l != "" {
		t.Fatalf("two -> %q: a group of two leaves has no last resort", l)
	}
	x := e.m.Explain("one", netx.TCP, netx.V4)
	if x.Reason != group.ReasonLastResort || x.Sentence != "last resort: the only leaf, dead" || x.Leaf != "a" {
		t.Fatalf("one explains %+v", x)
	}
	// The warning: once per 60 s per group.
	n := e.logs.count("last resort")
	for range 5 {
		e.tcp("one")
	}
	if got := e.logs.count("last resort"); got != n {
		t.Fatalf("%d more warnings within 60 s", got-n)
	}
	e.clock.advance(group.LastResortWarnEvery)
	e.tcp("one")
	if got := e.logs.count("last resort"); got != n+1 {
		t.Fatalf("%d warnings after 60 s, want one more than %d", got, n)
	}
}

func TestADeadOnlyLeafOfASubGroupIsNoCandidateOfItsParent(t *testing.T) {
	e := build(t, []spec.Group{
		auto("fallback", "parent", "sub", "b"),
		sel("sub", "a"),
	}, leaves("a", "b"))
	e.h.kill("a")
	if l := e.tcp("parent"); l != "b" {
		t.Fatalf("parent -> %q, want b: sub's last resort is its own, not a candidate", l)
	}
	if l := e.tcp("sub"); l != "a" {
		t.Fatalf("sub on its own -> %q, want the last resort a", l)
	}
}

func TestEverySelectionTellsHealthOfEachGroupWalked(t *testing.T) {
	e := build(t, []spec.Group{
		auto("urltest", "top", "mid", "x"),
		auto("fallback", "mid", "a"),
		auto("urltest", "other", "a"),
	}, leaves("a", "x"))
	e.h.latency("x", health.TCP, 100)
	e.h.latency("a", health.TCP, 10)
	if l := e.tcp("top"); l != "a" {
		t.Fatalf("top -> %q", l)
	}
	if e.h.selections("top") != 1 || e.h.selections("mid") != 1 || e.h.selections("other") != 0 {
		t.Fatalf("selected: top %d mid %d other %d", e.h.selections("top"), e.h.selections("mid"), e.h.selections("other"))
	}
	// Introspection is not a selection.
	e.m.Explain("top", netx.TCP, netx.V4)
	e.m.SelectionChain("top", netx.TCP)
	e.m.Groups()
	if e.h.selections("top") != 1 || e.h.selections("mid") != 1 {
		t.Fatal("introspection counted as a selection")
	}
}

func TestNewRefusesWhatTheConfigurationCannotMean(t *testing.T) {
	ls := leaves("a")
	for _, c := range []struct {
		groups []spec.Group
		err    string
	}{
		{[]spec.Group{auto("score", "s", "pool")}, `group "s": member "pool" is a balancer: a score group ranks leaves it can name, and a balancer picks its own; list the balancer's outbounds instead`},
		{[]spec.Group{auto("random", "s", "a")}, `group "s": unknown policy "random"`},
		{[]spec.Group{sel("s", "nope")}, `group "s": member "nope" names no outbound, balancer or group`},
		{[]spec.Group{sel("a", "a")}, `tag "a" names both an outbound and a group`},
		{[]spec.Group{sel("s", "a"), sel("s", "a")}, `group "s" is defined twice`},
	} {
		_, _, err := group.New(c.groups, nil, ls, map[string]*plane.Target{"pool": newBalancer(t, ls, "a")}, group.Options{})
		if err == nil || err.Error() != c.err {
			t.Errorf("error %v, want %q", err, c.err)
		}
	}
}

func TestASelectorWarnsThatItIgnoresCheckURL(t *testing.T) {
	g := sel("s", "a")
	g.CheckURL = "https://example.com/"
	e := build(t, []spec.Group{g}, leaves("a"))
	if !equal(e.warnings, []string{`group "s": selector ignores check_url`}) {
		t.Fatalf("warnings %q", e.warnings)
	}
	e.h.url("a", g.CheckURL, 0, false)
	if e.tcp("s") != "a" {
		t.Fatal("a selector's choice was gated by the check_url it ignores")
	}
	if len(e.m.URLChecks()) != 0 {
		t.Fatal("a selector registered a check_url")
	}
}

func TestAWalkWithoutHealthReadsEveryNodeAliveAndAllocatesNothing(t *testing.T) {
	ls := leaves("a", "b")
	m, _, err := group.New([]spec.Group{auto("urltest", "u", "a", "b")}, nil, ls, nil, group.Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	target := m.Target("u")
	q := plane.Query{Network: netx.TCP}
	if l := target.Resolve(&q); l == nil || l.ID().Tag != "a" {
		t.Fatalf("u -> %v", l)
	}
	if n := testing.AllocsPerRun(100, func() { target.Resolve(&q) }); n != 0 {
		t.Fatalf("%v allocations per selection", n)
	}
}

func TestQueriesOutsideTheKnownNetworksAndFamiliesAreRefused(t *testing.T) {
	e := build(t, []spec.Group{sel("s", "a")}, leaves("a"))
	q := plane.Query{Network: 7}
	if l := e.m.Target("s").Resolve(&q); l != nil {
		t.Fatal("network 7 resolved")
	}
	q = plane.Query{Family: 3}
	if l := e.m.Target("s").Resolve(&q); l != nil {
		t.Fatal("family 3 resolved")
	}
	if e.m.Target("nope") != nil {
		t.Fatal("a target for an unknown group")
	}
	if !strings.Contains(e.m.Explain("nope", netx.TCP, netx.V4).Sentence, "no such group") {
		t.Fatal("explaining an unknown group")
	}
}
