package group_test

import (
	"errors"
	"testing"

	"switchyard/group"
	"switchyard/netx"
	"switchyard/spec"
)

func TestClearDropsTheChoiceBackToTheDefault(t *testing.T) {
	type call struct {
		group, member string
		net           netx.Network
	}
	var persisted, interrupted []call
	def := sel("s", "a", "b", "c")
	def.Default = "c"
	e := build(t, []spec.Group{def, auto("urltest", "u", "a")}, leaves("a", "b", "c"), func(o *group.Options) {
		o.OnPersist = func(g string, n netx.Network, m string) { persisted = append(persisted, call{g, m, n}) }
		o.OnInterrupt = func(g, m string, n netx.Network) int { interrupted = append(interrupted, call{g, m, n}); return 1 }
	})
	if _, err := e.m.Select("s", "b", netx.TCP); err != nil {
		t.Fatal(err)
	}
	persisted, interrupted = nil, nil
	n, err := e.m.Clear("s")
	if err != nil || n != 1 {
		t.Fatalf("Clear -> %d, %v; want the one TCP interruption", n, err)
	}
	if e.tcp("s") != "c" || e.udp("s") != "c" {
		t.Fatalf("after Clear: tcp %q udp %q, want the default c", e.tcp("s"), e.udp("s"))
	}
	if len(persisted) != 1 || persisted[0] != (call{"s", "", netx.TCP}) {
		t.Fatalf("persisted %v, want only TCP cleared", persisted)
	}
	if len(interrupted) != 1 || interrupted[0] != (call{"s", "b", netx.TCP}) {
		t.Fatalf("interrupted %v", interrupted)
	}
	if info := e.m.Groups()[0]; info.Chosen != [2]string{} || info.Now != [2]string{"c", "c"} {
		t.Fatalf("info %+v", info)
	}
	// Nothing chosen: nothing to clear.
	if n, err := e.m.Clear("s"); n != 0 || err != nil || len(persisted) != 1 {
		t.Fatalf("a second Clear -> %d, %v, persisted %v", n, err, persisted)
	}
	if _, err := e.m.Clear("u"); !errors.Is(err, group.ErrNotSelector) {
		t.Fatalf("Clear on a urltest: %v", err)
	}
	if _, err := e.m.Clear("nope"); !errors.Is(err, group.ErrUnknownGroup) {
		t.Fatalf("Clear on an unknown group: %v", err)
	}
}
