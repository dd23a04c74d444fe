package warm

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/outbound"
)

// fakeWarmer is a scripted node: it records every Warm and Cool; a pool
// gets one connection per Warm, a session comes up. With gate set, Warm
// waits for a value on it (or its context).
type fakeWarmer struct {
	kind outbound.WarmKind
	gate chan struct{}

	mu    sync.Mutex
	keeps []bool

	cools     atomic.Int32
	pooled    atomic.Int32
	up        atomic.Bool
	active    atomic.Int32
	maxActive atomic.Int32
}

func (f *fakeWarmer) Warm(ctx context.Context, keep bool) (bool, error) {
	n := f.active.Add(1)
	defer f.active.Add(-1)
	for {
		m := f.maxActive.Load()
		if n <= m || f.maxActive.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	f.keeps = append(f.keeps, keep)
	f.mu.Unlock()
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	if f.kind == outbound.WarmPool {
		if f.pooled.Load() > 0 {
			return false, nil
		}
		f.pooled.Store(1)
		return true, nil
	}
	return !f.up.Swap(true), nil
}

func (f *fakeWarmer) Cool() {
	f.cools.Add(1)
	f.pooled.Store(0)
	f.up.Store(false)
}

func (f *fakeWarmer) Warmth() outbound.Warmth {
	return outbound.Warmth{Kind: f.kind, Pooled: int(f.pooled.Load()), Up: f.up.Load()}
}

// warms is how many Warm calls came, and with keep how many of them.
func (f *fakeWarmer) warms() (n, kept int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, k := range f.keeps {
		if k {
			kept++
		}
	}
	return len(f.keeps), kept
}

// fakeSource is a scripted configuration.
type fakeSource struct {
	mu      sync.Mutex
	nodes   []Node
	picks   []health.NodeID
	choices []health.NodeID
	udp     [][]health.NodeID
}

func (s *fakeSource) Nodes() []Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Node(nil), s.nodes...)
}

func (s *fakeSource) GroupPicks() []health.NodeID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]health.NodeID(nil), s.picks...)
}

func (s *fakeSource) SelectorChoices() []health.NodeID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]health.NodeID(nil), s.choices...)
}

func (s *fakeSource) UDPRanked() [][]health.NodeID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]health.NodeID(nil), s.udp...)
}

func (s *fakeSource) setChoices(ids ...health.NodeID) {
	s.mu.Lock()
	s.choices = ids
	s.mu.Unlock()
}

func (s *fakeSource) setUDP(r ...[]health.NodeID) {
	s.mu.Lock()
	s.udp = r
	s.mu.Unlock()
}

func (s *fakeSource) Begin(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	return ctx, cancel
}

func nodeID(i int) health.NodeID {
	var id health.NodeID
	id[0], id[15] = byte(i), 0x5a
	return id
}

// fleet is n scripted nodes of kind, named n0..n(n-1), at version 1.
func fleet(n int, kind outbound.WarmKind, udp bool) ([]Node, []*fakeWarmer) {
	nodes := make([]Node, n)
	ws := make([]*fakeWarmer, n)
	for i := range n {
		ws[i] = &fakeWarmer{kind: kind}
		nodes[i] = Node{ID: nodeID(i), Version: 1, Name: "n" + string(rune('a'+i)), Out: ws[i], UDP: udp}
	}
	return nodes, ws
}

type harness struct {
	t     *testing.T
	clock *healthtest.Clock
	m     *Manager
	src   *fakeSource
}

func newHarness(t *testing.T, src *fakeSource, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, clock: healthtest.NewClock(healthtest.Epoch), src: src}
	h.m = New(Options{Clock: h.clock})
	h.m.Update(src, cfg)
	t.Cleanup(h.m.Close)
	return h
}

// settle waits for a pass that started after the call and for every
// attempt it started to end. The first wait may end with a pass that was
// already under way; the second pass started after it.
func (h *harness) settle() {
	h.t.Helper()
	for range 2 {
		n := h.m.passes.Load()
		h.m.Wake()
		waitFor(h.t, "a pass", func() bool { return h.m.passes.Load() > n })
	}
	waitFor(h.t, "the attempts", func() bool { return h.m.inflight.Load() == 0 })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
