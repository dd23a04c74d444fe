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

func TestASelectorResolvesTheRuntimeChoiceThenTheDefaultThenTheFirstMember(t *testing.T) {
	g := sel("s", "a", "b", "c")
	e := build(t, []spec.Group{g, sel("plain", "a", "b")}, leaves("a", "b", "c"))
	if e.tcp("plain") != "a" {
		t.Fatalf("no choice, no default -> %q, want the first member a", e.tcp("plain"))
	}
	g.Default = "b"
	e = build(t, []spec.Group{g}, leaves("a", "b", "c"))
	if e.tcp("s") != "b" || e.udp("s") != "b" {
		t.Fatalf("default b -> %q/%q", e.tcp("s"), e.udp("s"))
	}
	if _, err := e.m.Select("s", "c", netx.TCP); err != nil {
		t.Fatal(err)
	}
	if e.tcp("s") != "c" || e.udp("s") != "b" {
		t.Fatalf("TCP choice c -> tcp %q udp %q, want c and the default b", e.tcp("s"), e.udp("s"))
	}
	// A default naming no member falls to the first member, with a warning.
	g.Default = "zz"
	e = build(t, []spec.Group{g}, leaves("a", "b", "c"))
	if e.tcp("s") != "a" || len(e.warnings) != 1 {
		t.Fatalf("default zz -> %q, warnings %q", e.tcp("s"), e.warnings)
	}
}

func TestASelectorsIneligibleChoiceGoesOnlyToItsFinalNeverToASibling(t *testing.T) {
	e := build(t, []spec.Group{
		sel("bare", "a", "b"),
		withFinal(sel("final", "a", "b"), "direct"),
	}, leaves("a", "b", "direct"))
	e.h.kill("a")
	if l := e.udp("bare"); l != "" {
		t.Fatalf("bare's dead choice over UDP -> %q, want refused", l)
	}
	// TCP: through the choice bare has the one leaf a, served as the last
	// resort — the same leaf, never the sibling b.
	if l := e.tcp("bare"); l != "a" {
		t.Fatalf("bare's dead choice over TCP -> %q, want the last resort a", l)
	}
	if l := e.tcp("final"); l != "direct" {
		t.Fatalf("final's dead choice -> %q, want direct", l)
	}
	x := e.m.Explain("bare", netx.UDP, netx.V4)
	want := `the chosen member "a" is not eligible (no UDP state and dead on tcp4) and there is no final: flows are refused`
	if x.Reason != group.ReasonRefused || x.Sentence != want {
		t.Fatalf("bare explains %q %q", x.Reason, x.Sentence)
	}
	if c := x.Candidates[1]; c.Excluded != group.ExclusionNotChosen || c.Eligible {
		t.Fatalf("the sibling b: %+v", c)
	}
}

func TestSelectWritesNetworksSeparatelyOrBothAndPersistsEachChangedNetwork(t *testing.T) {
	type persisted struct {
		group, member string
		net           netx.Network
	}
	var got []persisted
	e := build(t, []spec.Group{sel("s", "a", "b", "c")}, leaves("a", "b", "c"), func(o *group.Options) {
		o.OnPersist = func(g string, n netx.Network, m string) { got = append(got, persisted{g, m, n}) }
	})
	if _, err := e.m.Select("s", "b", netx.UDP); err != nil {
		t.Fatal(err)
	}
	if e.tcp("s") != "a" || e.udp("s") != "b" {
		t.Fatalf("UDP write -> tcp %q udp %q", e.tcp("s"), e.udp("s"))
	}
	// A Clash write (no network): both; UDP already is b, so only TCP persists.
	if _, err := e.m.Select("s", "b"); err != nil {
		t.Fatal(err)
	}
	if e.tcp("s") != "b" || e.udp("s") != "b" {
		t.Fatalf("both write -> tcp %q udp %q", e.tcp("s"), e.udp("s"))
	}
	want := []persisted{{"s", "b", netx.UDP}, {"s", "b", netx.TCP}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("persisted %v, want %v", got, want)
	}
	info := e.m.Groups()[0]
	if info.Chosen != [2]string{"b", "b"} || info.Now != [2]string{"b", "b"} {
		t.Fatalf("info %+v", info)
	}
}

func TestSelectReturnsTheInterruptedCountOnlyAfterTheCallbackReturned(t *testing.T) {
	type call struct {
		group, member string
		net           netx.Network
	}
	var mu sync.Mutex
	var calls []call
	returned := false
	onInterrupt := func(g, m string, n netx.Network) int {
		time.Sleep(10 * time.Millisecond) // the flows close
		mu.Lock()
		calls = append(calls, call{g, m, n})
		returned = true
		mu.Unlock()
		return 2
	}
	quiet := sel("quiet", "a", "b")
	quiet.Interrupt = false
	e := build(t, []spec.Group{sel("s", "a", "b"), quiet}, leaves("a", "b"), func(o *group.Options) { o.OnInterrupt = onInterrupt })
	n, err := e.m.Select("s", "b")
	mu.Lock()
	done := returned
	mu.Unlock()
	if err != nil || n != 4 || !done {
		t.Fatalf("Select -> %d, %v (callbacks returned: %v), want 4 after both returned", n, err, done)
	}
	if len(calls) != 2 || calls[0] != (call{"s", "a", netx.TCP}) || calls[1] != (call{"s", "a", netx.UDP}) {
		t.Fatalf("interrupts %v", calls)
	}
	// Writing the same choice again changes nothing.
	if n, _ := e.m.Select("s", "b"); n != 0 || len(calls) != 2 {
		t.Fatalf("a repeated write interrupted %d", n)
	}
	// A group with interrupt off closes nothing.
	if n, _ := e.m.Select("quiet", "b"); n != 0 || len(calls) != 2 {
		t.Fatalf("interrupt=false closed %d", n)
	}
}

func TestSelectErrorsNameTheGroupAndTheMember(t *testing.T) {
	e := build(t, []spec.Group{sel("s", "a"), auto("urltest", "u", "a")}, leaves("a"))
	for _, c := range []struct {
		group, member string
		is            error
		text          string
	}{
		{"nope", "a", group.ErrUnknownGroup, `group "nope": no such group`},
		{"u", "a", group.ErrNotSelector, `group "u" is a urltest group: not a selector`},
		{"s", "zz", group.ErrNotMember, `group "s": "zz": not a member`},
	} {
		_, err := e.m.Select(c.group, c.member)
		if !errors.Is(err, c.is) || err.Error() != c.text {
			t.Errorf("Select(%q, %q): %v, want %q", c.group, c.member, err, c.text)
		}
	}
}

func TestURLTestPicksTheLowestAverageAndKeepsTheIncumbentWithinTolerance(t *testing.T) {
	g := auto("urltest", "u", "a", "b", "c")
	g.Tolerance = 50 * time.Millisecond
	e := build(t, []spec.Group{g}, leaves("a", "b", "c"))
	e.h.latency("a", health.TCP, 120)
	e.h.latency("b", health.TCP, 48)
	e.h.latency("c", health.TCP, 90)
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q, want the lowest b", l)
	}
	// c drops to 42ms: 42+50 >= 48, b stays.
	e.h.latency("c", health.TCP, 42)
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q, want the incumbent b within tolerance", l)
	}
	x := e.m.Explain("u", netx.TCP, netx.V4)
	if x.Reason != group.ReasonHeld || x.Sentence != "lowest average 42ms against the incumbent's 48ms within 50ms tolerance" ||
		x.BestLatency != 42*time.Millisecond || x.IncumbentLatency != 48*time.Millisecond || x.Incumbent != "b" || x.Tolerance != 50*time.Millisecond {
		t.Fatalf("explains %+v", x)
	}
	// The incumbent's current average is read again: b degrades to 148ms.
	e.h.latency("b", health.TCP, 148)
	if l := e.tcp("u"); l != "c" {
		t.Fatalf("-> %q, want c once b degraded beyond tolerance", l)
	}
	x = e.m.Explain("u", netx.TCP, netx.V4)
	if x.Reason != group.ReasonLowest || x.Sentence != "lowest average 42ms against the incumbent's 148ms beyond 50ms tolerance" {
		t.Fatalf("explains %q %q", x.Reason, x.Sentence)
	}
}

func TestURLTestToleranceIsAtLeastOneMillisecond(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b")}, leaves("a", "b"))
	e.h.latency("a", health.TCP, 10)
	e.h.latency("b", health.TCP, 20)
	if l := e.tcp("u"); l != "a" {
		t.Fatal(l)
	}
	e.h.mu.Lock()
	e.h.lat[hkey{node("b", 1), health.TCP, netx.V4}] = 9500 * time.Microsecond // 0.5ms better than a
	e.h.mu.Unlock()
	e.h.epoch.Add(1)
	if l := e.tcp("u"); l != "a" {
		t.Fatalf("-> %q: 0.5ms better is within the 1ms minimum tolerance", l)
	}
	e.h.latency("b", health.TCP, 8)
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q: 2ms better is beyond it", l)
	}
	if x := e.m.Explain("u", netx.TCP, netx.V4); x.Tolerance != time.Millisecond {
		t.Fatalf("tolerance %v", x.Tolerance)
	}
}

func TestURLTestStrikesDemoteACandidateAndSkipTheIncumbentsHysteresis(t *testing.T) {
	g := auto("urltest", "u", "a", "b")
	g.Tolerance = 100 * time.Millisecond
	e := build(t, []spec.Group{g}, leaves("a", "b"))
	e.h.latency("a", health.TCP, 10)
	e.h.latency("b", health.TCP, 50)
	if l := e.tcp("u"); l != "a" {
		t.Fatal(l)
	}
	// a's real dials fail: it carries a strike, so tolerance does not hold it.
	e.h.strike("a", 1)
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q, want b: a struck incumbent is replaced at once", l)
	}
	x := e.m.Explain("u", netx.TCP, netx.V4)
	if x.Candidates[0].Strikes != 1 || x.Candidates[0].Why != "carrying 1 strikes: ranked below members without" {
		t.Fatalf("a's row %+v", x.Candidates[0])
	}
	// Faster but struck still ranks below the unstruck b.
	e.h.latency("a", health.TCP, 1)
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q, want b above the struck a", l)
	}
	e.h.strike("a", 0)
	e.h.latency("b", health.TCP, 500)
	if l := e.tcp("u"); l != "a" {
		t.Fatalf("-> %q after the strikes cleared", l)
	}
}

func TestURLTestRanksUnmeasuredMembersLastInDeclarationOrder(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b", "c", "d")}, leaves("a", "b", "c", "d"))
	if l := e.tcp("u"); l != "a" {
		t.Fatalf("nothing measured -> %q, want the first eligible a", l)
	}
	if x := e.m.Explain("u", netx.TCP, netx.V4); x.Reason != group.ReasonUnmeasured {
		t.Fatalf("explains %+v", x)
	}
	e.h.latency("d", health.TCP, 900)
	if l := e.tcp("u"); l != "d" {
		t.Fatalf("-> %q, want the only measured d", l)
	}
	e.h.kill("d")
	e.h.kill("a")
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q, want b: the first unmeasured eligible", l)
	}
}

func TestURLTestWithCheckURLRanksAndGatesByTheGroupsOwnProbe(t *testing.T) {
	const url = "https://probe.example/204"
	g := auto("urltest", "u", "a", "b")
	g.CheckURL = url
	e := build(t, []spec.Group{g, auto("urltest", "plain", "a", "b")}, leaves("a", "b"))
	e.h.latency("a", health.TCP, 10) // the global probe favours a
	e.h.latency("b", health.TCP, 90)
	e.h.url("a", url, 300, true)
	e.h.url("b", url, 30, true)
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q, want b by its check_url average", l)
	}
	if l := e.tcp("plain"); l != "a" {
		t.Fatalf("plain -> %q, want a by the TCP average", l)
	}
	e.h.url("b", url, 30, false)
	if l := e.tcp("u"); l != "a" {
		t.Fatalf("-> %q: b's check_url failing removes it from u", l)
	}
	if l := e.tcp("plain"); l != "a" {
		t.Fatal(l)
	}
	if c := e.m.Explain("u", netx.TCP, netx.V4).Candidates[1]; c.Excluded != group.ExclusionCheckURL || c.Why != "check_url "+url+" failing" {
		t.Fatalf("b's row %+v", c)
	}
	// check_url state is TCP-only: UDP (mirroring the check_url ranking)
	// still takes b.
	if l := e.udp("u"); l != "b" {
		t.Fatalf("UDP -> %q", l)
	}
	e.h.url("a", url, 300, false)
	if l := e.udp("u"); l == "" {
		t.Fatal("UDP was gated by the TCP-only check_url")
	}
}

func TestURLTestUDPRanksByDataUDPThenDNSUDPThenMirrorsTCP(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b", "c")}, leaves("a", "b", "c"))
	e.h.latency("a", health.TCP, 10)
	e.h.latency("b", health.TCP, 50)
	e.h.latency("c", health.TCP, 90)
	if l := e.udp("u"); l != "a" {
		t.Fatalf("no UDP averages -> %q, want a mirroring TCP", l)
	}
	if x := e.m.Explain("u", netx.UDP, netx.V4); x.Sentence != "no UDP averages, so UDP mirrors the TCP ranking: lowest average 10ms" {
		t.Fatalf("explains %q", x.Sentence)
	}
	e.h.latency("c", health.DNSUDP, 20)
	if l := e.udp("u"); l != "c" {
		t.Fatalf("-> %q, want c, the only one with UDP evidence", l)
	}
	e.h.latency("b", health.DataUDP, 30)
	e.h.latency("b", health.DNSUDP, 5)
	if l := e.udp("u"); l != "c" {
		t.Fatalf("-> %q: b's DataUDP 30ms is beyond c's 20ms (tolerance 1ms), its DNSUDP not used", l)
	}
	if l := e.tcp("u"); l != "a" {
		t.Fatalf("TCP -> %q: TCP and UDP winners are separate", l)
	}
}

func TestURLTestReranksOnlyWhenTheHealthEpochMoves(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b")}, leaves("a", "b"))
	e.h.latency("a", health.TCP, 10)
	e.h.latency("b", health.TCP, 50)
	if l := e.tcp("u"); l != "a" {
		t.Fatal(l)
	}
	// A change the epoch does not show is not seen.
	e.h.mu.Lock()
	e.h.lat[hkey{node("b", 1), health.TCP, netx.V4}] = time.Millisecond
	e.h.mu.Unlock()
	if l := e.tcp("u"); l != "a" {
		t.Fatalf("-> %q without an epoch move", l)
	}
	e.h.epoch.Add(1)
	if l := e.tcp("u"); l != "b" {
		t.Fatalf("-> %q after the epoch moved", l)
	}
}

func TestAnAutomaticSwitchInterruptsOffTheSelectingGoroutineOnlyWhenTheGroupInterrupts(t *testing.T) {
	type call struct {
		group, member string
		net           netx.Network
	}
	calls := make(chan call, 4)
	g := auto("urltest", "u", "a", "b")
	g.Interrupt = true
	fb := auto("fallback", "fb", "a", "b")
	fb.Interrupt = true
	e := build(t, []spec.Group{g, fb, auto("urltest", "quiet", "a", "b")}, leaves("a", "b"), func(o *group.Options) {
		o.OnInterrupt = func(g, m string, n netx.Network) int { calls <- call{g, m, n}; return 1 }
	})
	e.h.latency("a", health.TCP, 10)
	e.h.latency("b", health.TCP, 50)
	for _, tag := range []string{"u", "fb", "quiet"} {
		if l := e.tcp(tag); l != "a" {
			t.Fatal(tag, l)
		}
	}
	e.h.kill("a")
	for _, tag := range []string{"u", "fb", "quiet"} {
		if l := e.tcp(tag); l != "b" {
			t.Fatal(tag, l)
		}
	}
	got := map[call]bool{}
	for range 2 {
		select {
		case c := <-calls:
			got[c] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("interrupts so far %v", got)
		}
	}
	if !got[call{"u", "a", netx.TCP}] || !got[call{"fb", "a", netx.TCP}] {
		t.Fatalf("interrupts %v", got)
	}
	select {
	case c := <-calls:
		t.Fatalf("an extra interrupt %v", c)
	case <-time.After(50 * time.Millisecond):
	}
}

func TestFallbackPinsTheFirstEligibleMemberAndNeverFailsBack(t *testing.T) {
	e := build(t, []spec.Group{auto("fallback", "fb", "a", "b", "c")}, leaves("a", "b", "c"))
	if e.tcp("fb") != "a" {
		t.Fatal(e.tcp("fb"))
	}
	e.h.kill("a")
	e.clock.advance(time.Minute)
	if l := e.tcp("fb"); l != "b" {
		t.Fatalf("-> %q, want b", l)
	}
	x := e.m.Explain("fb", netx.TCP, netx.V4)
	if x.Reason != group.ReasonPinned || x.Sentence != "pinned by fallback since 10:03:05" || !x.Since.Equal(e.clock.Now()) {
		t.Fatalf("explains %q %q %v", x.Reason, x.Sentence, x.Since)
	}
	e.h.revive("a")
	if l := e.tcp("fb"); l != "b" {
		t.Fatalf("-> %q: a's recovery does not fail back", l)
	}
	// UDP has its own pin: it never left a.
	if l := e.udp("fb"); l != "a" {
		t.Fatalf("UDP -> %q, want its own pin a", l)
	}
	e.h.kill("b")
	if l := e.tcp("fb"); l != "a" {
		t.Fatalf("-> %q once b died, want the first eligible a", l)
	}
}

func TestLoadBalanceRoundRobinsTheEligibleMembersWithSeparateCursors(t *testing.T) {
	e := build(t, []spec.Group{auto("loadbalance", "lb", "a", "b", "c")}, leaves("a", "b", "c"))
	var got []string
	for range 6 {
		got = append(got, e.tcp("lb"))
	}
	if !equal(got, []string{"a", "b", "c", "a", "b", "c"}) {
		t.Fatalf("TCP picks %v", got)
	}
	// The UDP cursor is its own: it starts at a.
	if l := e.udp("lb"); l != "a" {
		t.Fatalf("first UDP pick %q", l)
	}
	e.h.kill("b")
	got = got[:0]
	for range 4 {
		got = append(got, e.tcp("lb"))
	}
	if !equal(got, []string{"a", "c", "a", "c"}) {
		t.Fatalf("picks with b dead %v", got)
	}
	if x := e.m.Explain("lb", netx.TCP, netx.V4); x.Reason != group.ReasonRoundRobin || x.Sentence != "round robin over 2 eligible members" {
		t.Fatalf("explains %q %q", x.Reason, x.Sentence)
	}
}

func TestLoadBalanceKeepsAnAssociationsLeafWhileItIsEligible(t *testing.T) {
	e := build(t, []spec.Group{auto("loadbalance", "lb", "a", "b", "c")}, leaves("a", "b", "c"))
	prefer := plane.OutboundID{Tag: "b", Version: 1}
	for range 4 {
		if l, _ := resolve(t, e.m.Target("lb"), netx.UDP, netx.V4, &prefer); l != "b" {
			t.Fatalf("-> %q, want the association's b", l)
		}
	}
	e.h.set("b", health.DataUDP, netx.V4, false)
	e.h.set("b", health.DNSUDP, netx.V4, false)
	if l, _ := resolve(t, e.m.Target("lb"), netx.UDP, netx.V4, &prefer); l == "b" || l == "" {
		t.Fatalf("-> %q once b is UDP-dead", l)
	}
}

func TestRotationNeverInterrupts(t *testing.T) {
	g := auto("loadbalance", "lb", "a", "b")
	g.Interrupt = true
	var calls int
	e := build(t, []spec.Group{g}, leaves("a", "b"), func(o *group.Options) {
		o.OnInterrupt = func(string, string, netx.Network) int { calls++; return 0 }
	})
	for range 10 {
		e.tcp("lb")
	}
	e.m.Close()
	if calls != 0 {
		t.Fatalf("%d interrupts", calls)
	}
}

func TestRetryIsTheLatencyOrderedTopThreeOfTheInnermostURLTestWithoutTheFailedLeaf(t *testing.T) {
	e := build(t, []spec.Group{
		sel("s", "u", "x"),
		auto("urltest", "u", "a", "b", "c", "d", "f"),
		auto("fallback", "fb", "a", "b"),
	}, leaves("a", "b", "c", "d", "f", "x"))
	for tag, ms := range map[string]int{"a": 10, "b": 40, "c": 20, "d": 30, "f": 5} {
		e.h.latency(tag, health.TCP, ms)
	}
	e.h.kill("f")
	q := plane.Query{Network: netx.TCP}
	leaf := e.m.Target("s").Resolve(&q)
	if leaf == nil || leaf.ID().Tag != "a" || !equal(q.Path(), []string{"s", "u", "a"}) {
		t.Fatalf("s -> %v via %v", leaf, q.Path())
	}
	var got []string
	for _, r := range e.m.Retry(&q, leaf) {
		got = append(got, r.ID().Tag)
	}
	if !equal(got, []string{"c", "d", "b"}) {
		t.Fatalf("retry %v, want [c d b]", got)
	}
	q = plane.Query{Network: netx.TCP}
	leaf = e.m.Target("fb").Resolve(&q)
	if r := e.m.Retry(&q, leaf); r != nil {
		t.Fatalf("a fallback's failure retried %v", r)
	}
}

func TestACachedWinnerNoLongerEligibleGivesWayToTheFirstEligibleMember(t *testing.T) {
	e := build(t, []spec.Group{auto("urltest", "u", "a", "b", "c")}, leaves("a", "b", "c"))
	e.h.latency("c", health.TCP, 5)
	if l := e.tcp("u"); l != "c" {
		t.Fatal(l)
	}
	// c dies without the epoch moving (a health that lags): the cached
	// winner is not served dead.
	e.h.mu.Lock()
	e.h.dead[hkey{node("c", 1), health.TCP, netx.V4}] = true
	e.h.mu.Unlock()
	if l := e.tcp("u"); l != "a" {
		t.Fatalf("-> %q, want the first eligible a", l)
	}
}

func TestLoadBalanceKeepsASubGroupMemberCarryingTheAssociationsLeaf(t *testing.T) {
	e := build(t, []spec.Group{auto("loadbalance", "lb", "b", "sub"), sel("sub", "a")}, leaves("a", "b"))
	prefer := plane.OutboundID{Tag: "a", Version: 1}
	for range 3 {
		if l, chain := resolve(t, e.m.Target("lb"), netx.UDP, netx.V4, &prefer); l != "a" || !equal(chain, []string{"lb", "sub", "a"}) {
			t.Fatalf("-> %q via %v, want a through sub", l, chain)
		}
	}
}
