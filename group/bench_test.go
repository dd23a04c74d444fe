package group_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/spec"
)

// benchHealth is a Health as cheap as the engine's reads are meant to be:
// every node alive, latencies fixed at construction.
type benchHealth struct {
	lat   map[health.NodeID]time.Duration
	epoch atomic.Uint64
}

func (h *benchHealth) Alive(health.NodeID, health.Domain, netx.Family) bool { return true }
func (h *benchHealth) UDPEligible(health.NodeID, netx.Family) bool          { return true }
func (h *benchHealth) HasUDPState(health.NodeID, netx.Family) bool          { return false }
func (h *benchHealth) Latency(id health.NodeID, d health.Domain, _ netx.Family) (time.Duration, bool) {
	if d != health.TCP {
		return 0, false
	}
	l, ok := h.lat[id]
	return l, ok
}
func (h *benchHealth) URLLatency(string, string) (time.Duration, bool) { return 0, false }
func (h *benchHealth) URLAlive(string, string) bool                    { return true }
func (h *benchHealth) Strikes(health.NodeID) int                       { return 0 }
func (h *benchHealth) Epoch() uint64                                   { return h.epoch.Load() }
func (h *benchHealth) Selected(string)                                 {}

// nested is three levels of 100 members: urltest l1 over 99 leaves and
// urltest l2, l2 over 99 leaves and selector l3, l3 over 100 leaves. l3's
// choice is the fastest leaf, so l1 picks l2 and l2 picks l3.
func nested(tb testing.TB) (*group.Manager, *benchHealth) {
	tb.Helper()
	h := &benchHealth{lat: map[health.NodeID]time.Duration{}}
	ls := map[string]group.Leaf{}
	var members [3][]string
	for lvl := range 3 {
		for i := range 100 {
			if lvl < 2 && i == 99 {
				break
			}
			tag := fmt.Sprintf("n%d-%d", lvl+1, i)
			id := node(tag, 1)
			ls[tag] = group.Leaf{Tag: tag, Node: id, Target: plane.NewTarget(plane.OutboundID{Tag: tag, Version: 1}, nop{}), UDP: true}
			h.lat[id] = time.Duration(100+i) * time.Millisecond
			members[lvl] = append(members[lvl], tag)
		}
	}
	h.lat[node("n3-0", 1)] = time.Millisecond
	groups := []spec.Group{
		{Tag: "l1", Policy: "urltest", Members: append(members[0], "l2")},
		{Tag: "l2", Policy: "urltest", Members: append(members[1], "l3")},
		{Tag: "l3", Policy: "selector", Members: members[2]},
	}
	m, _, err := group.New(groups, nil, ls, nil, group.Options{Health: h})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(m.Close)
	return m, h
}

func BenchmarkResolveNested(b *testing.B) {
	m, _ := nested(b)
	target := m.Target("l1")
	for _, n := range []netx.Network{netx.TCP, netx.UDP} {
		b.Run(n.String(), func(b *testing.B) {
			q := plane.Query{Network: n}
			if l := target.Resolve(&q); l == nil || l.ID().Tag != "n3-0" {
				b.Fatalf("l1 -> %v", l)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				target.Resolve(&q)
			}
		})
	}
}

func TestSelectionAllocatesNothing(t *testing.T) {
	m, h := nested(t)
	target := m.Target("l1")
	for _, n := range []netx.Network{netx.TCP, netx.UDP} {
		q := plane.Query{Network: n}
		if l := target.Resolve(&q); l == nil || l.ID().Tag != "n3-0" || !equal(q.Path(), []string{"l1", "l2", "l3", "n3-0"}) {
			t.Fatalf("l1 -> %v via %v", l, q.Path())
		}
		if a := testing.AllocsPerRun(200, func() { target.Resolve(&q) }); a != 0 {
			t.Fatalf("%v: %v allocations per cached selection", n, a)
		}
		// Re-ranking after every epoch move allocates nothing either.
		if a := testing.AllocsPerRun(50, func() { h.epoch.Add(1); target.Resolve(&q) }); a != 0 {
			t.Fatalf("%v: %v allocations per re-ranking selection", n, a)
		}
	}

	// Every policy, finals, balancers' neighbours and the last resort.
	e := build(t, []spec.Group{
		auto("fallback", "fb", "a", "b"),
		auto("loadbalance", "lb", "a", "b", "sub"),
		sel("sub", "a"),
		withFinal(auto("fallback", "finalled", "dead"), "sub"),
		sel("last", "dead"),
	}, leaves("a", "b", "dead"))
	e.h.kill("dead")
	prefer := plane.OutboundID{Tag: "b", Version: 1}
	for _, c := range []struct {
		tag    string
		n      netx.Network
		f      netx.Family
		prefer *plane.OutboundID
	}{
		{"fb", netx.TCP, netx.V4, nil}, {"fb", netx.UDP, netx.V6, nil},
		{"lb", netx.TCP, netx.V4, nil}, {"lb", netx.UDP, netx.V4, &prefer},
		{"finalled", netx.TCP, netx.V6, nil}, {"last", netx.TCP, netx.V4, nil},
	} {
		q := plane.Query{Network: c.n, Family: c.f, Prefer: c.prefer}
		target := e.m.Target(c.tag)
		if target.Resolve(&q) == nil {
			t.Fatalf("%s refused", c.tag)
		}
		if a := testing.AllocsPerRun(100, func() { target.Resolve(&q) }); a != 0 {
			t.Errorf("%s %v %v: %v allocations", c.tag, c.n, c.f, a)
		}
	}
}

func TestConcurrentSelectionsWritesAndHealthChanges(t *testing.T) {
	e := build(t, []spec.Group{
		auto("urltest", "u", "s", "a", "b"),
		sel("s", "a", "lb"),
		auto("loadbalance", "lb", "a", "b", "c"),
		withFinal(auto("fallback", "fb", "u", "c"), "direct"),
	}, leaves("a", "b", "c", "direct"), func(o *group.Options) {
		o.OnConnectivity = func(string, health.Domain, netx.Family, bool) {}
		o.OnInterrupt = func(string, string, netx.Network) int { return 0 }
	})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := plane.Query{Network: netx.Network(i % 2), Family: netx.Family(i / 2)}
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, tag := range []string{"u", "s", "lb", "fb"} {
					e.m.Target(tag).Resolve(&q)
				}
			}
		}()
	}
	for i := range 200 {
		tag := []string{"a", "b", "c"}[i%3]
		if i%2 == 0 {
			e.h.kill(tag)
		} else {
			e.h.revive(tag)
		}
		e.h.latency(tag, health.TCP, 10+i%7)
		e.m.NodeChanged(node(tag, 1))
		if _, err := e.m.Select("s", []string{"a", "lb"}[i%2]); err != nil {
			t.Fatal(err)
		}
		e.m.Explain("u", netx.TCP, netx.V4)
	}
	close(stop)
	wg.Wait()
}

// scoreGroup is a Score group of n leaves over an engine of its own.
func scoreGroup(tb testing.TB, n int) *group.Manager {
	tb.Helper()
	ls := map[string]group.Leaf{}
	var members []string
	for i := range n {
		tag := fmt.Sprintf("s%d", i)
		ls[tag] = group.Leaf{Tag: tag, Node: node(tag, 2), Target: plane.NewTarget(plane.OutboundID{Tag: tag, Version: 1}, nop{}), UDP: true}
		members = append(members, tag)
	}
	h := &benchHealth{lat: map[health.NodeID]time.Duration{}}
	m, _, err := group.New([]spec.Group{{Tag: "smart", Policy: "score", Members: members}}, nil, ls, nil, group.Options{Health: h})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// BenchmarkScoreSelect50 is one TCP flow's selection through a Score group
// of 50 members: the candidates through the liveness filter, the engine's
// rank and the attempt on the query, then its release (the data path
// begins or releases each). The group's own share allocates nothing (the
// candidate rows are pooled); what allocates is the engine's.
func BenchmarkScoreSelect50(b *testing.B) {
	m := scoreGroup(b, 50)
	t := m.Target("smart")
	dsts := make([]netx.Addr, 64)
	for i := range dsts {
		dsts[i] = netx.DomainAddr(fmt.Sprintf("site%d.example", i), 443)
	}
	now := time.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		q := plane.Query{Network: netx.TCP, Dst: dsts[i%len(dsts)]}
		if t.Resolve(&q) == nil {
			b.Fatal("no leaf")
		}
		q.Attempts.Release(now)
		i++
	}
}

// BenchmarkScorePeek50 is a readonly rank of the same group (the Clash
// view's now, Explain).
func BenchmarkScorePeek50(b *testing.B) {
	m := scoreGroup(b, 50)
	b.ReportAllocs()
	for b.Loop() {
		for _, in := range m.Groups() {
			_ = in.Now
		}
	}
}
