package balancer_test

import (
	"slices"
	"testing"

	"switchyard/balancer"
	"switchyard/plane"
)

func TestFailoverTakesTheFirstHealthyMemberInOrder(t *testing.T) {
	b := newBalancer(t, balancer.Failover, "a", "b", "c")
	if got := picks(3, b.Select); !slices.Equal(got, []string{"a", "a", "a"}) {
		t.Fatalf("all healthy: picks %v", got)
	}
	b.SetHealthy(0, false)
	if got := picks(3, b.Select); !slices.Equal(got, []string{"b", "b", "b"}) {
		t.Fatalf("a down: picks %v", got)
	}
	b.SetHealthy(0, true)
	if got := picks(3, b.Select); !slices.Equal(got, []string{"a", "a", "a"}) {
		t.Fatalf("a recovered: picks %v", got)
	}
}

func TestRoundRobinCyclesOnlyThroughHealthyMembers(t *testing.T) {
	b := newBalancer(t, balancer.RoundRobin, "a", "b", "c")
	b.SetHealthy(1, false)
	if got := picks(4, b.Select); !slices.Equal(got, []string{"a", "c", "a", "c"}) {
		t.Fatalf("b down: picks %v", got)
	}
}

func TestRoundRobinVisitsEveryHealthyMember(t *testing.T) {
	b := newBalancer(t, balancer.RoundRobin, "a", "b", "c")
	if got := picks(6, b.Select); !slices.Equal(got, []string{"a", "b", "c", "a", "b", "c"}) {
		t.Fatalf("picks %v", got)
	}
}

func TestEveryMemberDownStillSelectsRatherThanDropping(t *testing.T) {
	for _, s := range []balancer.Strategy{balancer.Failover, balancer.RoundRobin} {
		b := newBalancer(t, s, "a", "b", "c")
		for i := range 3 {
			b.SetHealthy(i, false)
		}
		if got := picks(3, b.Select); !slices.Equal(got, []string{"a", "a", "a"}) {
			t.Errorf("%s, all down: picks %v", s, got)
		}
		prefer := id("b")
		if got := b.SelectPreferring(&prefer).ID().Tag; got != "a" {
			t.Errorf("%s, all down, preferring b: pick %s", s, got)
		}
	}
}

func TestRoundRobinKeepsAHealthyPreferredMemberAndDropsItOnceDown(t *testing.T) {
	b := newBalancer(t, balancer.RoundRobin, "a", "b", "c")
	prefer := id("b")
	sel := func() *plane.Target { return b.SelectPreferring(&prefer) }
	if got := picks(4, sel); !slices.Equal(got, []string{"b", "b", "b", "b"}) {
		t.Fatalf("preferring healthy b: picks %v", got)
	}
	b.SetHealthy(1, false)
	got := picks(4, sel)
	for _, tag := range got {
		if tag != "a" && tag != "c" {
			t.Fatalf("preferring b while it is down: picks %v", got)
		}
	}
}

func TestFailoverIgnoresThePreference(t *testing.T) {
	b := newBalancer(t, balancer.Failover, "a", "b", "c")
	prefer := id("b")
	if got := b.SelectPreferring(&prefer).ID().Tag; got != "a" {
		t.Fatalf("failover preferring b: pick %s", got)
	}
}

func TestAPreferenceForAnotherVersionIsNoPreference(t *testing.T) {
	b := newBalancer(t, balancer.RoundRobin, "a", "b")
	prefer := plane.OutboundID{Tag: "b", Version: 7}
	sel := func() *plane.Target { return b.SelectPreferring(&prefer) }
	if got := picks(4, sel); !slices.Equal(got, []string{"a", "b", "a", "b"}) {
		t.Fatalf("preferring b@v7: picks %v", got)
	}
}

func TestNoPreferenceIsSelect(t *testing.T) {
	b := newBalancer(t, balancer.RoundRobin, "a", "b")
	sel := func() *plane.Target { return b.SelectPreferring(nil) }
	if got := picks(4, sel); !slices.Equal(got, []string{"a", "b", "a", "b"}) {
		t.Fatalf("no preference: picks %v", got)
	}
}

func TestSelectionReturnsTheMembersOwnTarget(t *testing.T) {
	ms := members(somewhere, "a", "b")
	b, err := balancer.New("pool", ms, balancer.RoundRobin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Select() != ms[0].Target || b.Select() != ms[1].Target {
		t.Fatal("selection does not hand back the member's target")
	}
}

func TestABalancerNeedsAtLeastOneMember(t *testing.T) {
	for _, ms := range [][]balancer.Member{nil, {}} {
		b, err := balancer.New("pool", ms, balancer.Failover, nil)
		if err == nil || err.Error() != "a balancer needs at least one outbound" {
			t.Fatalf("New(%v) = %v, %v", ms, b, err)
		}
	}
}

func TestAMemberNeedsATargetAndAnUpstream(t *testing.T) {
	if _, err := balancer.New("pool", []balancer.Member{{Probe: somewhere}}, balancer.Failover, nil); err == nil {
		t.Fatal("a member without a target was accepted")
	}
	ms := members(somewhere, "a")
	ms[0].Probe = balancer.Member{}.Probe
	if _, err := balancer.New("pool", ms, balancer.Failover, nil); err == nil {
		t.Fatal("a member without an upstream was accepted")
	}
}

func TestStrategyNamesAreValidated(t *testing.T) {
	for name, want := range map[string]balancer.Strategy{"failover": balancer.Failover, "round_robin": balancer.RoundRobin} {
		s, err := balancer.ParseStrategy(name)
		if err != nil || s != want {
			t.Errorf("ParseStrategy(%q) = %v, %v", name, s, err)
		}
		if s.String() != name {
			t.Errorf("%v.String() = %q", s, s.String())
		}
	}
	for _, name := range []string{"roundrobin", "", "Failover", "round-robin"} {
		_, err := balancer.ParseStrategy(name)
		want := `unknown balancer strategy "` + name + `" (expected "failover" or "round_robin")`
		if err == nil || err.Error() != want {
			t.Errorf("ParseStrategy(%q) error = %v, want %s", name, err, want)
		}
	}
}

func TestSetHealthyReturnsThePreviousStateAndLogsOnlyChanges(t *testing.T) {
	var l logs
	b, err := balancer.New("pool", members(somewhere, "a", "b"), balancer.Failover, slogOf(&l))
	if err != nil {
		t.Fatal(err)
	}
	if !b.Healthy(0) || !b.Healthy(1) {
		t.Fatal("members do not start healthy")
	}
	steps := []struct {
		up, was bool
	}{{true, true}, {false, true}, {false, false}, {true, false}}
	for _, s := range steps {
		if was := b.SetHealthy(1, s.up); was != s.was || b.Healthy(1) != s.up {
			t.Fatalf("SetHealthy(1, %v) = %v, Healthy = %v", s.up, was, b.Healthy(1))
		}
	}
	if l.count("balancer member b is now down") != 1 || l.count("balancer member b is now up") != 1 || len(l.records) != 2 {
		t.Fatalf("logged:\n%s", &l)
	}
}

func BenchmarkSelectRoundRobin(b *testing.B) {
	bal, err := balancer.New("pool", members(somewhere, "a", "b", "c", "d"), balancer.RoundRobin, nil)
	if err != nil {
		b.Fatal(err)
	}
	bal.SetHealthy(1, false)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bal.Select()
		}
	})
}

func TestStatusReadsWithoutMovingTheCursor(t *testing.T) {
	f := newBalancer(t, balancer.Failover, "a", "b")
	f.SetHealthy(0, false)
	if st := f.Status(); st.Now != "b" || !slices.Equal(st.Up, []bool{false, true}) {
		t.Fatalf("failover, a down: %+v", st)
	}
	f.SetHealthy(1, false)
	if st := f.Status(); st.Now != "" {
		t.Fatalf("failover, every member down: %+v", st)
	}
	rr := newBalancer(t, balancer.RoundRobin, "a", "b", "c")
	for range 5 {
		if st := rr.Status(); st.Now != "" || len(st.Up) != 3 {
			t.Fatalf("round robin: %+v", st)
		}
	}
	if got := picks(3, rr.Select); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Status moved the cursor: picks %v", got)
	}
}
