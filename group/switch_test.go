package group_test

import (
	"sync"
	"testing"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/spec"
)

// switches records OnSwitch calls as "group network reason".
type switches struct {
	mu  sync.Mutex
	got []string
}

func (s *switches) on(g string, n netx.Network, r group.SwitchReason) {
	s.mu.Lock()
	s.got = append(s.got, g+" "+n.String()+" "+string(r))
	s.mu.Unlock()
}

func (s *switches) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.got
	s.got = nil
	return out
}

// Every change of a group's effective member is heard once with its
// reason: a Selector write, a URLTest moving to a faster member, leaving a
// struck or dead incumbent, a Fallback pin moving; a first pick, a repeated
// write and a rotation are no switch.
func TestEverySwitchIsHeardWithItsReason(t *testing.T) {
	rec := &switches{}
	u := auto("urltest", "u", "a", "b")
	e := build(t, []spec.Group{sel("s", "a", "b"), u, auto("fallback", "fb", "a", "b"), auto("loadbalance", "lb", "a", "b")},
		leaves("a", "b"), func(o *group.Options) { o.OnSwitch = rec.on })
	want := func(what string, w ...string) {
		t.Helper()
		got := rec.take()
		if !equal(got, w) {
			t.Fatalf("%s: switches %q, want %q", what, got, w)
		}
	}
	e.h.latency("a", health.TCP, 10)
	e.h.latency("b", health.TCP, 50)
	e.tcp("u")
	e.tcp("fb")
	e.tcp("lb")
	e.tcp("lb")
	want("first picks and a rotation")
	if _, err := e.m.Select("s", "b", netx.TCP); err != nil {
		t.Fatal(err)
	}
	e.m.Select("s", "b", netx.TCP)
	want("a selector write", "s tcp manual")
	if _, err := e.m.Clear("s", netx.TCP); err != nil {
		t.Fatal(err)
	}
	e.m.Clear("s", netx.TCP)
	want("a selector cleared back to its first member", "s tcp manual")
	e.m.Select("s", "b", netx.TCP)
	want("a selector write after the clear", "s tcp manual")
	e.h.latency("b", health.TCP, 1)
	e.tcp("u")
	want("a faster member", "u tcp lower_latency")
	e.h.strike("b", 1)
	e.tcp("u")
	want("a struck incumbent", "u tcp strikes")
	e.h.strike("b", 0)
	e.h.latency("a", health.TCP, 500)
	e.tcp("u")
	rec.take()
	e.h.kill("b")
	e.tcp("u")
	e.tcp("fb")
	want("a dead winner (the pin on a stays)", "u tcp unavailable")
	e.h.kill("a")
	e.h.revive("b")
	e.tcp("fb")
	want("a dead pin", "fb tcp unavailable")
}
