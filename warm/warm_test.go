package warm

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/outbound"
)

func TestPreconnectCount(t *testing.T) {
	tests := []struct {
		name       string
		preconnect int
		want       int
	}{
		{"auto (8) of 12", 8, 8},
		{"3 of 12", 3, 3},
		{"off", 0, 0},
		{"more than there are", 20, 12},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodes, ws := fleet(12, outbound.WarmPool, false)
			h := newHarness(t, &fakeSource{nodes: nodes}, Config{Preconnect: tc.preconnect})
			h.m.Start()
			h.settle()
			h.clock.Advance(3 * PassInterval)
			h.settle()
			got := 0
			for i, w := range ws {
				n, kept := w.warms()
				if n > 1 || kept > 0 {
					t.Fatalf("node %d: %d warms, %d kept: preconnect seeds one connection, once, and keeps nothing", i, n, kept)
				}
				got += n
			}
			if got != tc.want {
				t.Fatalf("preconnect warmed %d nodes, want %d", got, tc.want)
			}
			for _, st := range h.m.States() {
				if st.Owners != 0 {
					t.Fatalf("%s: preconnect left owner bits %v", st.Name, st.Owners)
				}
			}
		})
	}
}

// The groups' current picks go first, then configuration order; only
// bare-TCP-poolable nodes count.
func TestPreconnectOrder(t *testing.T) {
	nodes, ws := fleet(6, outbound.WarmPool, false)
	ws[1].kind = outbound.WarmSession // a QUIC node: not a pool
	src := &fakeSource{nodes: nodes, picks: []health.NodeID{nodeID(5), nodeID(1), nodeID(5)}}
	h := newHarness(t, src, Config{Preconnect: 3})
	h.m.Start()
	h.settle()
	var got []int
	for i, w := range ws {
		if n, _ := w.warms(); n > 0 {
			got = append(got, i)
		}
	}
	if want := []int{0, 2, 5}; !slices.Equal(got, want) {
		t.Fatalf("preconnected %v, want %v (the pick 5, then 0 and 2 in order; 1 is no pool)", got, want)
	}
}

func TestNoPassBeforeStart(t *testing.T) {
	nodes, ws := fleet(2, outbound.WarmPool, false)
	h := newHarness(t, &fakeSource{nodes: nodes, choices: []health.NodeID{nodeID(0)}}, Config{Preconnect: 8, SelectorPin: true})
	h.clock.Advance(PassInterval)
	time.Sleep(50 * time.Millisecond)
	if n, _ := ws[0].warms(); n != 0 {
		t.Fatalf("warmed before Start (before the inbounds bind)")
	}
}

func TestSelectorPinKeepsTheChoiceAndRepairsEveryPass(t *testing.T) {
	nodes, ws := fleet(3, outbound.WarmPool, false)
	src := &fakeSource{nodes: nodes, choices: []health.NodeID{nodeID(1), nodeID(1)}}
	h := newHarness(t, src, Config{SelectorPin: true, Preconnect: 0})
	h.m.Start()
	waitFor(t, "the pin's first warm", func() bool { _, k := ws[1].warms(); return k == 1 })
	st, _ := h.m.State("nb")
	if st.Owners != OwnSelector || st.Pooled != 1 {
		t.Fatalf("pinned node state %+v", st)
	}
	// The server closed the pinned connection (or a flow took it): within
	// one pass a new one is there.
	ws[1].pooled.Store(0)
	h.clock.Advance(PassInterval)
	waitFor(t, "the repair", func() bool { return ws[1].pooled.Load() == 1 })
	if _, k := ws[1].warms(); k < 2 {
		t.Fatalf("repair without a Warm")
	}
	for _, i := range []int{0, 2} {
		if n, _ := ws[i].warms(); n != 0 {
			t.Fatalf("node %d, not chosen, was warmed", i)
		}
	}
}

func TestSelectorPinOffKeepsNothing(t *testing.T) {
	nodes, ws := fleet(2, outbound.WarmPool, false)
	h := newHarness(t, &fakeSource{nodes: nodes, choices: []health.NodeID{nodeID(0)}}, Config{})
	h.m.Start()
	h.settle()
	h.clock.Advance(PassInterval)
	h.settle()
	if n, _ := ws[0].warms(); n != 0 {
		t.Fatalf("selector_pin = false still warmed the choice")
	}
}

func TestAChoiceChangeWakesThePassAtOnce(t *testing.T) {
	nodes, ws := fleet(2, outbound.WarmSession, false)
	src := &fakeSource{nodes: nodes, choices: []health.NodeID{nodeID(0)}}
	h := newHarness(t, src, Config{SelectorPin: true})
	h.m.Start()
	waitFor(t, "the first choice warm", func() bool { return ws[0].up.Load() })
	src.setChoices(nodeID(1))
	h.m.Wake() // what the groups' OnSwitch calls; the clock does not move
	waitFor(t, "the new choice warm", func() bool { return ws[1].up.Load() })
	waitFor(t, "the old choice cooled", func() bool { return ws[0].cools.Load() == 1 })
	if st, _ := h.m.State("na"); st.Owners != 0 {
		t.Fatalf("the old choice still owned: %v", st.Owners)
	}
}

func TestUDPWarmSetRanking(t *testing.T) {
	// Sessions 0..5 carry UDP; 6 is a pool (no UDP state); 7 a session
	// without UDP.
	nodes, ws := fleet(8, outbound.WarmSession, true)
	ws[6].kind = outbound.WarmPool
	nodes[7].UDP = false
	id := nodeID
	rankings := [][]health.NodeID{
		{id(6), id(7), id(0), id(1), id(2), id(3)}, // group A, IPv4
		{id(4), id(0), id(5)},                      // group A, IPv6
		{id(1), id(3)},                             // group B, IPv4
	}
	tests := []struct {
		n    int
		want []int // in retained rank order
	}{
		{1, []int{0, 4, 1}},
		{2, []int{0, 4, 1, 3}},
		{3, []int{0, 4, 1, 3, 2, 5}},
		{9, []int{0, 4, 1, 3, 2, 5}}, // min(N, 3)
	}
	for _, tc := range tests {
		byID := map[health.NodeID]*Runtime{}
		for _, n := range nodes {
			byID[n.ID] = &Runtime{node: n}
		}
		var got []int
		for _, r := range udpSet(rankings, byID, tc.n) {
			got = append(got, int(r.node.ID[0]))
		}
		slices.Sort(got)
		want := slices.Clone(tc.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("N=%d: warm set %v, want %v", tc.n, got, want)
		}
	}
}

func TestUDPWarmSetCap(t *testing.T) {
	// 30 groups, each with its own three session leaves: N = 1 keeps
	// min(1,3) = 1 per group, capped at 4 × 1.
	nodes, _ := fleet(90, outbound.WarmSession, true)
	var rankings [][]health.NodeID
	for g := range 30 {
		rankings = append(rankings, []health.NodeID{nodeID(3 * g), nodeID(3*g + 1), nodeID(3*g + 2)})
	}
	byID := map[health.NodeID]*Runtime{}
	for _, n := range nodes {
		byID[n.ID] = &Runtime{node: n}
	}
	for _, n := range []int{1, 2, 5} {
		got := udpSet(rankings, byID, n)
		if len(got) != UDPCapFactor*n {
			t.Fatalf("N=%d: %d retained, want the cap %d", n, len(got), UDPCapFactor*n)
		}
		// The best ranked go first: every group's first leaf before any
		// second one.
		for _, r := range got[:min(len(got), 30)] {
			if int(r.node.ID[0])%3 != 0 {
				t.Fatalf("N=%d: a second-ranked leaf %d retained before first-ranked ones", n, r.node.ID[0])
			}
		}
	}
}

func TestUDPWarmSetOwnsAndKeepsSessionsUp(t *testing.T) {
	nodes, ws := fleet(3, outbound.WarmSession, true)
	src := &fakeSource{nodes: nodes, udp: [][]health.NodeID{{nodeID(2), nodeID(0), nodeID(1)}}}
	h := newHarness(t, src, Config{UDPWarmSet: 1})
	h.m.Start()
	waitFor(t, "the UDP leaf up", func() bool { return ws[2].up.Load() })
	h.settle()
	if ws[0].up.Load() || ws[1].up.Load() {
		t.Fatalf("leaves beyond min(N,3) = 1 warmed")
	}
	if st, _ := h.m.State("nc"); st.Owners != OwnUDP || !st.Up {
		t.Fatalf("state %+v", st)
	}
}

func TestAtMostFourAttemptsAtOnce(t *testing.T) {
	nodes, ws := fleet(10, outbound.WarmSession, true)
	gate := make(chan struct{})
	var ids []health.NodeID
	for i, w := range ws {
		w.gate = gate
		ids = append(ids, nodeID(i))
	}
	// Ten Selector choices and ten UDP leaves, all the same nodes.
	src := &fakeSource{nodes: nodes, choices: ids, udp: [][]health.NodeID{ids[:3], ids[3:6], ids[6:9], ids[9:]}}
	h := newHarness(t, src, Config{SelectorPin: true, UDPWarmSet: 3})
	h.m.Start()
	active := func() (n int32) {
		for _, w := range ws {
			n += w.active.Load()
		}
		return n
	}
	waitFor(t, "four attempts running", func() bool { return active() == MaxAttempts })
	h.clock.Advance(PassInterval) // another pass meanwhile starts nothing more
	time.Sleep(50 * time.Millisecond)
	if n := active(); n != MaxAttempts {
		t.Fatalf("%d attempts at once, want %d", n, MaxAttempts)
	}
	for range ws {
		gate <- struct{}{}
	}
	waitFor(t, "every node up", func() bool {
		for _, w := range ws {
			if !w.up.Load() {
				return false
			}
		}
		return true
	})
	if n := active(); n != 0 {
		t.Fatalf("%d attempts still running", n)
	}
	for i, w := range ws {
		if n, _ := w.warms(); n != 1 {
			t.Fatalf("node %d: %d attempts, want 1 (one under way at a time per node)", i, n)
		}
	}
}

func TestOwnershipBitsAreIndependent(t *testing.T) {
	nodes, ws := fleet(2, outbound.WarmSession, true)
	src := &fakeSource{nodes: nodes, choices: []health.NodeID{nodeID(0)}, udp: [][]health.NodeID{{nodeID(0)}}}
	h := newHarness(t, src, Config{SelectorPin: true, UDPWarmSet: 1})
	h.m.Start()
	h.settle()
	if st, _ := h.m.State("na"); st.Owners != OwnSelector|OwnUDP {
		t.Fatalf("owners %v, want both", st.Owners)
	}
	src.setChoices(nodeID(1)) // the Selector moves away: UDP still holds it
	h.settle()
	if st, _ := h.m.State("na"); st.Owners != OwnUDP || ws[0].cools.Load() != 0 || !st.Up {
		t.Fatalf("after the selector's release: owners %v, cools %d, up %v", st.Owners, ws[0].cools.Load(), st.Up)
	}
	src.setUDP() // the last owner goes: cooled
	h.settle()
	if st, _ := h.m.State("na"); st.Owners != 0 || ws[0].cools.Load() != 1 {
		t.Fatalf("after the last release: owners %v, cools %d", st.Owners, ws[0].cools.Load())
	}
}

func TestReloadKeepsUnchangedRuntimes(t *testing.T) {
	nodes, ws := fleet(2, outbound.WarmPool, false)
	src := &fakeSource{nodes: nodes, choices: []health.NodeID{nodeID(0), nodeID(1)}}
	h := newHarness(t, src, Config{SelectorPin: true})
	h.m.Start()
	h.settle()
	keep, change := h.m.Runtime(nodeID(0), 1), h.m.Runtime(nodeID(1), 1)
	if keep == nil || change == nil || keep.Owners() != OwnSelector || change.Owners() != OwnSelector {
		t.Fatalf("before the reload: %v %v", keep, change)
	}
	// The reload keeps node 0 (same identity, same version) and changes
	// node 1 (same identity, a new version and outbound).
	fresh := &fakeWarmer{kind: outbound.WarmPool}
	next := &fakeSource{nodes: []Node{nodes[0], {ID: nodeID(1), Version: 2, Name: "nb", Out: fresh}}, choices: []health.NodeID{nodeID(0), nodeID(1)}}
	h.m.Update(next, Config{SelectorPin: true})
	if got := h.m.Runtime(nodeID(0), 1); got != keep || got.Owners() != OwnSelector {
		t.Fatalf("the unchanged node's runtime was replaced or lost its bits")
	}
	if ws[0].cools.Load() != 0 || ws[0].pooled.Load() != 1 {
		t.Fatalf("the unchanged node's pool was touched")
	}
	if ws[1].cools.Load() != 1 {
		t.Fatalf("the changed node's old runtime was not cooled")
	}
	h.settle()
	nr := h.m.Runtime(nodeID(1), 2)
	if nr == nil || nr == change || nr.Owners() != OwnSelector || fresh.pooled.Load() != 1 {
		t.Fatalf("the changed node has no fresh, pinned runtime: %+v", nr)
	}
	if h.m.Runtime(nodeID(1), 1) != nil {
		t.Fatalf("the old version's runtime is still listed")
	}
	if change.Owners() != 0 {
		t.Fatalf("the old runtime keeps bits %v", change.Owners())
	}
}

// Each attempt that opened something or failed is one debug line with
// the node, the mechanism, the outcome and the duration.
func TestAnAttemptIsLogged(t *testing.T) {
	nodes, ws := fleet(2, outbound.WarmSession, false)
	var buf syncBuffer
	m := New(Options{Clock: healthtest.NewClock(healthtest.Epoch), Log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer m.Close()
	m.Update(&fakeSource{nodes: nodes, choices: []health.NodeID{nodeID(0)}}, Config{SelectorPin: true})
	m.Start()
	waitFor(t, "the attempt", func() bool { return ws[0].up.Load() })
	waitFor(t, "its line", func() bool { return strings.Contains(buf.String(), "warm attempt") })
	line := buf.String()
	for _, want := range []string{"level=DEBUG", "node=na", `what="selector pin"`, "outcome=opened", "duration="} {
		if !strings.Contains(line, want) {
			t.Fatalf("the line lacks %s: %s", want, line)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }
