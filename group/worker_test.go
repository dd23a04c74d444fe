package group_test

import (
	"testing"

	"go.uber.org/goleak"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/spec"
)

func TestCloseStopsTheInterruptWorkerAndSelectionGoesOn(t *testing.T) {
	g := auto("urltest", "u", "a", "b")
	g.Interrupt = true
	calls := 0
	h := newHealth()
	m, _, err := group.New([]spec.Group{g}, nil, leaves("a", "b"), nil, group.Options{
		Health:      h,
		OnInterrupt: func(string, string, netx.Network) int { calls++; return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	h.latency("a", health.TCP, 10)
	if l, _ := resolve(t, m.Target("u"), netx.TCP, netx.V4, nil); l != "a" {
		t.Fatal(l)
	}
	m.Close()
	m.Close()
	goleak.VerifyNone(t)
	// After Close a switch still happens and interrupts nothing.
	h.kill("a")
	if l, _ := resolve(t, m.Target("u"), netx.TCP, netx.V4, nil); l != "b" {
		t.Fatalf("after Close -> %q", l)
	}
	if calls != 0 {
		t.Fatalf("%d interrupts after Close", calls)
	}
}
