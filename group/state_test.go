package group_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
)

type slotKey struct {
	group string
	d     health.Domain
	f     netx.Family
}

// slots records connectivity callbacks.
type slots struct {
	mu    sync.Mutex
	state map[slotKey]bool
	calls []slotKey
}

func (s *slots) on(g string, d health.Domain, f netx.Family, alive bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == nil {
		s.state = map[slotKey]bool{}
	}
	k := slotKey{g, d, f}
	s.state[k] = alive
	s.calls = append(s.calls, k)
}

func (s *slots) take() []slotKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *slots) alive(g string, d health.Domain, f netx.Family) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state[slotKey{g, d, f}]
}

func TestConnectivityIsTheOROfReachableLeavesPlusTheSoleTCPLeafException(t *testing.T) {
	ls := leaves("a", "b", "vm", "x")
	vm := ls["vm"]
	vm.UDP = false
	ls["vm"] = vm
	var s slots
	e := build(t, []spec.Group{
		auto("fallback", "pair", "a", "b"),
		sel("one", "a"),
		auto("fallback", "tcponly", "vm"),
		auto("fallback", "parent", "pair", "x"),
		withFinal(auto("fallback", "finalled", "vm"), "b"),
	}, ls, func(o *group.Options) { o.OnConnectivity = s.on })
	e.m.PublishConnectivity()
	if n := len(s.take()); n != 5*6 {
		t.Fatalf("the exact snapshot made %d calls, want every slot of every group (30)", n)
	}
	for _, g := range []string{"pair", "one", "parent", "finalled"} {
		for _, d := range health.Domains {
			if !s.alive(g, d, netx.V4) || !s.alive(g, d, netx.V6) {
				t.Fatalf("%s %v not alive", g, d)
			}
		}
	}
	if !s.alive("tcponly", health.TCP, netx.V4) || s.alive("tcponly", health.DataUDP, netx.V4) || s.alive("tcponly", health.DNSUDP, netx.V6) {
		t.Fatal("a group of a TCP-only leaf: TCP alive, UDP domains dead")
	}
	// finalled reaches b through its final: UDP alive by b.
	if !s.alive("finalled", health.DataUDP, netx.V4) {
		t.Fatal("finalled's final does not count")
	}

	// a dies: pair keeps b and one keeps its sole-leaf TCP exception, so
	// no slot changes.
	e.h.kill("a")
	e.m.NodeChanged(node("a", 1))
	if got := s.take(); len(got) != 0 {
		t.Fatalf("a's death changed %v", got)
	}
	e.h.kill("b")
	e.m.NodeChanged(node("b", 1))
	got := s.take()
	want := map[slotKey]bool{{"pair", health.TCP, netx.V4}: true, {"pair", health.TCP, netx.V6}: true}
	if len(got) != len(want) || !want[got[0]] || !want[got[1]] {
		t.Fatalf("b's death changed %v, want pair's TCP slots only (parent keeps x)", got)
	}
	if s.alive("pair", health.TCP, netx.V4) || !s.alive("one", health.TCP, netx.V4) || !s.alive("parent", health.TCP, netx.V4) {
		t.Fatal("slots after both died")
	}
	// UDP state of a: one's UDP slot follows a (no exception for UDP).
	e.h.set("a", health.DataUDP, netx.V4, false)
	e.m.NodeChanged(node("a", 1))
	got = s.take()
	if len(got) != 1 || got[0] != (slotKey{"one", health.DataUDP, netx.V4}) {
		t.Fatalf("a's DataUDP death changed %v", got)
	}
	// A node no group reaches changes nothing.
	e.m.NodeChanged(node("zz", 1))
	if got := s.take(); len(got) != 0 {
		t.Fatal(got)
	}
}

func TestASelectorWriteRepublishesTheTCPException(t *testing.T) {
	var s slots
	e := build(t, []spec.Group{sel("s", "a", "lb"), auto("loadbalance", "lb", "b", "c")}, leaves("a", "b", "c"),
		func(o *group.Options) { o.OnConnectivity = s.on })
	e.h.kill("a")
	e.h.kill("b")
	e.h.kill("c")
	e.m.PublishConnectivity()
	s.take()
	if !s.alive("s", health.TCP, netx.V4) {
		t.Fatal("s chooses the sole leaf a: its TCP slot is alive")
	}
	if _, err := e.m.Select("s", "lb"); err != nil {
		t.Fatal(err)
	}
	if s.alive("s", health.TCP, netx.V4) {
		t.Fatal("s now reaches two dead leaves: its TCP slot is dead")
	}
}

func TestAReloadFailsOpenThenPublishesTheExactSnapshot(t *testing.T) {
	var s slots
	old := build(t, []spec.Group{sel("gone", "a"), sel("kept", "a")}, leaves("a"))
	e := build(t, []spec.Group{sel("kept", "a"), auto("fallback", "new", "a", "b")}, leaves("a", "b"),
		func(o *group.Options) { o.OnConnectivity = s.on })
	e.h.kill("a")
	e.h.kill("b")
	e.m.PublishFailOpen(old.m)
	if n := len(s.take()); n != 3*6 {
		t.Fatalf("fail-open made %d calls, want every slot of gone, kept and new", n)
	}
	if !s.alive("gone", health.TCP, netx.V4) || !s.alive("new", health.TCP, netx.V4) {
		t.Fatal("fail-open left a slot dead")
	}
	e.m.PublishConnectivity()
	if n := len(s.take()); n != 2*6 {
		t.Fatalf("the exact snapshot made %d calls", n)
	}
	if s.alive("new", health.TCP, netx.V4) || !s.alive("kept", health.TCP, netx.V4) {
		t.Fatal("the exact snapshot")
	}
}

func TestIdentitiesAreTheSupervisorsAndAMissingOneIsFresh(t *testing.T) {
	id := group.Identity{ID: [16]byte{1, 2, 3}, Created: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newClock()
	m, _, err := group.New([]spec.Group{sel("a", "x"), sel("b", "x")}, map[string]group.Identity{"a": id}, leaves("x"), nil,
		group.Options{Now: c.Now, Versions: map[string]uint32{"a": 7}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Target("a").ID() != (plane.OutboundID{Tag: "a", Version: 7}) || m.Target("b").ID().Version != 1 || !m.Target("a").IsChooser() {
		t.Fatalf("targets %v %v", m.Target("a").ID(), m.Target("b").ID())
	}
	if !equal(m.Tags(), []string{"a", "b"}) {
		t.Fatal(m.Tags())
	}
	infos := m.Groups()
	if infos[0].Identity != id {
		t.Fatalf("a's identity %+v", infos[0].Identity)
	}
	fresh := infos[1].Identity
	if fresh.ID == ([16]byte{}) || fresh.ID[6]>>4 != 4 || !fresh.Created.Equal(c.Now()) {
		t.Fatalf("b's fresh identity %+v", fresh)
	}
}

// reload builds a replacement manager with its own leaves and ids.
func reload(t *testing.T, groups []spec.Group, ids map[string]group.Identity, ls map[string]group.Leaf) *group.Manager {
	t.Helper()
	m, _, err := group.New(groups, ids, ls, nil, group.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func TestMigrationCarriesSelectorChoicesByMemberIdentity(t *testing.T) {
	ids := map[string]group.Identity{"s": {ID: [16]byte{1}}, "top": {ID: [16]byte{2}}, "sub": {ID: [16]byte{3}}, "other": {ID: [16]byte{4}}}
	groups := []spec.Group{sel("s", "a", "b"), sel("top", "a", "sub", "other"), sel("sub", "a"), sel("other", "a")}
	old := reload(t, groups, ids, leaves("a", "b"))
	if _, err := old.Select("s", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Select("top", "sub", netx.UDP); err != nil {
		t.Fatal(err)
	}

	// Same tags, b rebuilt under its NodeID, top's members reordered: both
	// choices survive.
	reordered := []spec.Group{sel("s", "a", "b"), sel("top", "other", "sub", "a"), sel("sub", "a"), sel("other", "a")}
	m := reload(t, reordered, ids, leaves("a", "b"))
	m.Migrate(old)
	if l, _ := resolve(t, m.Target("s"), netx.TCP, netx.V4, nil); l != "b" {
		t.Fatalf("s -> %q after the reload, want b kept by NodeID", l)
	}
	if info := m.Groups()[1]; info.Chosen != [2]string{"", "sub"} {
		t.Fatalf("top's choices %v, want UDP sub kept by identity", info.Chosen)
	}

	// The old manager refuses writes now.
	if _, err := old.Select("s", "a"); !errors.Is(err, group.ErrReplaced) {
		t.Fatalf("a write to the replaced manager: %v", err)
	}

	// b removed and added back: a new NodeID; sub renamed in place: a new
	// identity. Neither choice is retargeted.
	old2 := reload(t, groups, ids, leaves("a", "b"))
	old2.Select("s", "b")
	old2.Select("top", "sub")
	ls := leaves("a", "b")
	b := ls["b"]
	b.Node = node("b", 2)
	ls["b"] = b
	ids2 := map[string]group.Identity{"s": ids["s"], "top": ids["top"], "sub": {ID: [16]byte{9}}, "other": ids["other"]}
	m2 := reload(t, groups, ids2, ls)
	m2.Migrate(old2)
	if l, _ := resolve(t, m2.Target("s"), netx.TCP, netx.V4, nil); l != "a" {
		t.Fatalf("s -> %q, want the default a: the new b is another node", l)
	}
	if info := m2.Groups()[1]; info.Chosen != [2]string{"", ""} || info.Now[0] != "a" {
		t.Fatalf("top %+v, want no choice: sub is another group", info)
	}
}

func TestRestoreSetsAPersistedChoiceByNameAndIgnoresTheRest(t *testing.T) {
	var persisted int
	e := build(t, []spec.Group{sel("s", "a", "b"), auto("urltest", "u", "a")}, leaves("a", "b"),
		func(o *group.Options) { o.OnPersist = func(string, netx.Network, string) { persisted++ } })
	if !e.m.Restore("s", netx.UDP, "b") {
		t.Fatal("Restore refused a member")
	}
	if e.udp("s") != "b" || e.tcp("s") != "a" {
		t.Fatalf("restored -> tcp %q udp %q", e.tcp("s"), e.udp("s"))
	}
	if e.m.Restore("s", netx.TCP, "zz") || e.m.Restore("u", netx.TCP, "a") || e.m.Restore("nope", netx.TCP, "a") {
		t.Fatal("Restore applied a non-member, a non-selector or an unknown group")
	}
	if persisted != 0 {
		t.Fatal("Restore persisted")
	}
	if x := e.m.Explain("s", netx.UDP, netx.V4); x.Reason != group.ReasonChosen || x.Sentence != "chosen by hand" {
		t.Fatalf("explains %q %q", x.Reason, x.Sentence)
	}
}

func TestIntrospection(t *testing.T) {
	const url = "https://probe.example/"
	ls := leaves("a", "b", "x", "direct", "c")
	bal := newBalancer(t, ls, "c")
	top := withFinal(auto("urltest", "top", "mid", "x", "pool"), "direct")
	top.IdleTimeout = 5 * time.Minute
	top.CheckURL = url
	groups := []spec.Group{top, sel("mid", "a", "b"), auto("fallback", "lone", "c")}
	h := newHealth()
	m, _, err := group.New(groups, nil, ls, map[string]*plane.Target{"pool": bal}, group.Options{Health: h})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	h.url("mid", url, 10, true)
	h.url("x", url, 50, true)

	if got := m.NodeNames("top"); !equal(got, []string{"mid", "x", "pool"}) {
		t.Errorf("NodeNames %v", got)
	}
	if got := m.LeafNodeNames("top"); !equal(got, []string{"a", "b", "x", "pool"}) {
		t.Errorf("LeafNodeNames %v (the final is not listed)", got)
	}
	dt := m.DelayTestMembers("top")
	if len(dt) != 2 || dt[0].Member != "mid" || dt[0].Leaf != "a" || dt[0].Node != node("a", 1) || dt[1].Member != "x" || dt[1].Leaf != "x" {
		t.Errorf("DelayTestMembers %+v", dt)
	}
	if got := m.SelectionChain("top", netx.TCP); !equal(got, []string{"top", "mid", "a"}) {
		t.Errorf("SelectionChain %v", got)
	}
	checks := m.URLChecks()
	if len(checks) != 1 || checks[0].Group != "top" || checks[0].URL != url || len(checks[0].Members) != 2 {
		t.Errorf("URLChecks %+v", checks)
	}
	act := m.Activity()
	if len(act) != 3 || act[0].Group != "top" || !act[0].Sleeps || act[0].IdleTimeout != 5*time.Minute || act[1].Sleeps {
		t.Errorf("Activity %+v", act)
	}
	nodes := map[health.NodeID]bool{}
	for _, n := range act[0].Nodes {
		nodes[n] = true
	}
	if len(nodes) != 4 || !nodes[node("a", 1)] || !nodes[node("b", 1)] || !nodes[node("x", 1)] || !nodes[node("direct", 1)] {
		t.Errorf("top's nodes %v: a, b, x and the final's direct", act[0].Nodes)
	}
	info := m.Groups()
	if info[0].Tag != "top" || info[0].Policy != "urltest" || info[0].Final != "direct" || info[0].Now != [2]string{"mid", "mid"} ||
		!equal(info[0].Members, []string{"mid", "x", "pool"}) || info[1].Now != [2]string{"a", "a"} || !info[1].Interrupt {
		t.Errorf("Groups %+v", info)
	}
	if m.NodeNames("nope") != nil || m.LeafNodeNames("nope") != nil || m.DelayTestMembers("nope") != nil || m.SelectionChain("nope", netx.TCP) != nil {
		t.Error("an unknown group has names")
	}
}

func TestExplainNamesEveryExclusionAndTheOutcome(t *testing.T) {
	g := sel("s", "a", "b", "c")
	g.Default = "b"
	e := build(t, []spec.Group{
		g,
		auto("fallback", "fb", "a", "empty", "c"),
		auto("fallback", "empty", "a"),
		auto("fallback", "none", "a"),
	}, leaves("a", "b", "c"))
	if x := e.m.Explain("s", netx.TCP, netx.V4); x.Reason != group.ReasonDefault || x.Sentence != "the group's default" || x.Winner != "b" || x.Leaf != "b" || !equal(x.Chain, []string{"s", "b"}) {
		t.Fatalf("s explains %+v", x)
	}
	e.h.kill("a")
	x := e.m.Explain("fb", netx.TCP, netx.V4)
	if c := x.Candidates[0]; c.Excluded != group.ExclusionDead || c.Why != "dead on tcp4" || c.Kind != "outbound" {
		t.Errorf("fb's a %+v", c)
	}
	if c := x.Candidates[1]; c.Excluded != group.ExclusionNoPick || c.Why != `group "empty" yields no eligible leaf` || c.Kind != "group" {
		t.Errorf("fb's empty %+v", c)
	}
	if x.Winner != "c" || x.Reason != group.ReasonPinned {
		t.Errorf("fb explains %+v", x)
	}
	e.h.set("a", health.TCP, netx.V6, true)
	x = e.m.Explain("none", netx.UDP, netx.V4)
	if x.Reason != group.ReasonRefused || x.Sentence != "no eligible member and no final: flows are refused" || x.Chain != nil || x.Leaf != "" {
		t.Errorf("none explains %+v", x)
	}
	if c := e.m.Explain("none", netx.TCP, netx.V6); c.Winner != "a" || c.Reason != group.ReasonPinned {
		t.Errorf("none over V6 %+v", c)
	}
}
