package health_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
)

// probeTimes records the clock time of every TCP probe call of a node.
type probeTimes struct {
	healthtest.Prober
	clk *healthtest.Clock
	mu  sync.Mutex
	at  []time.Duration // since the clock's epoch
}

func (p *probeTimes) TCP(ctx context.Context, url, method string) (health.Result, error) {
	p.mu.Lock()
	p.at = append(p.at, p.clk.Now().Sub(healthtest.Epoch))
	p.mu.Unlock()
	return p.Prober.TCP(ctx, url, method)
}

func (p *probeTimes) times() []time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Duration(nil), p.at...)
}

// The periodic cycle runs every check interval; a dead path is left to the
// recovery scheduler, which probes it only once its cooldown is due, in
// deep backoff every 300 s, never stopping.
func TestRecoverySchedulerCadence(t *testing.T) {
	h := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = nil })
	p := &probeTimes{clk: h.clk}
	p.SetTCP(healthtest.Fail())
	h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: p}})
	h.start()
	h.step(3*time.Hour, 5*time.Second)
	s := time.Second
	// Cycles at 0 and 30 s fail in the grace; 60, 90 and 120 s count: dead
	// at 120 s with a 20 s cooldown; then 40, 80, 160, 300, 300 ...
	want := []time.Duration{0, 30 * s, 60 * s, 90 * s, 120 * s, 140 * s, 180 * s, 260 * s, 420 * s, 720 * s}
	for at := 720 * s; at+300*s <= 3*time.Hour; at += 300 * s {
		want = append(want, at+300*s)
	}
	got := p.times()
	if len(got) != len(want) {
		t.Fatalf("probes at %v\nwant %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("probe %d at %v, want %v\ngot %v", i, got[i], want[i], got)
		}
	}
}

// The recovery scheduler runs every min(5 s, check interval): with a 2 s
// interval a dead node whose cooldown is due is probed within 2 s.
func TestRecoveryIntervalFollowsShortCheckInterval(t *testing.T) {
	h := newHarness(t, func(o *health.Options) {
		o.UDPCheckDNS = nil
		o.CheckInterval = 2 * time.Second
	})
	p := &probeTimes{clk: h.clk}
	p.SetTCP(healthtest.Fail())
	h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: p}})
	for range 3 {
		h.e.ProbeNow(context.Background(), id(1)) // dead, cooldown 20 s
	}
	h.start()
	h.step(30*time.Second, time.Second)
	got := p.times()
	// 3 forced at 0 s, the first cycle at 0 s is parked; the recovery
	// probe comes at the first 2 s tick at or after 20 s, then 40 s later.
	if len(got) != 4 || got[3] != 20*time.Second {
		t.Fatalf("probes at %v, want [0 0 0 20s]", got)
	}
}

// A dead state's recovery: the first success makes the cooldown due, so
// the second comes at the next recovery tick.
func TestRecoveryVerifiesPromptly(t *testing.T) {
	h := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = nil })
	p := &probeTimes{clk: h.clk}
	p.SetTCP(healthtest.Fail())
	h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: p}})
	for range 3 {
		h.e.ProbeNow(context.Background(), id(1))
	}
	p.SetTCP(healthtest.OK(time.Millisecond))
	h.start()
	h.step(25*time.Second, time.Second)
	if !h.e.Alive(id(1), health.TCP, v4) {
		t.Fatalf("not revived; probes at %v", p.times())
	}
	if got := p.times(); len(got) != 5 || got[3] != 20*time.Second || got[4] != 25*time.Second {
		t.Errorf("probes at %v, want recovery probes at 20s and 25s", got)
	}
}

// A network change probes everything at once (no clock advance).
func TestNetworkChangeProbesAtOnce(t *testing.T) {
	h := newHarness(t, nil)
	h.register(3)
	h.start()
	h.e.NotifyNetworkChange()
	health.Settle(h.e)
	for i := 1; i <= 3; i++ {
		if tcp, udp := h.p(i).Calls(); tcp != 2 || udp != 2 {
			t.Errorf("node %d probes tcp=%d udp=%d, want 2 each", i, tcp, udp)
		}
	}
}

// Idle: a node held only by sleeping groups stops being probed after the
// idle timeout; Selected wakes it at once; a non-sleeping holder keeps a
// node awake; a node no group holds is probed.
func TestIdleSleepAndWake(t *testing.T) {
	h := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = nil; o.IdleTimeout = 10 * time.Minute })
	h.register(3)
	h.e.SyncActivity([]health.Activity{
		{Group: "auto", Sleeps: true, Nodes: []health.NodeID{id(1), id(2)}},
		{Group: "sel", Nodes: []health.NodeID{id(2)}},
		{Group: "fast", Sleeps: true, IdleTimeout: time.Hour, Nodes: []health.NodeID{id(3)}},
	})
	h.start()
	h.step(30*time.Minute, 5*time.Second)
	calls := func(i int) int { n, _ := h.p(i).Calls(); return n }
	// Node 1: awake for 10 min (cycles 0..600 s: 21 probes), then asleep.
	if got := calls(1); got != 21 {
		t.Errorf("node 1 probed %d times in 30 min with a 10 min idle timeout, want 21", got)
	}
	if got := calls(2); got != 61 {
		t.Errorf("node 2 (held by a selector) probed %d times, want 61", got)
	}
	if got := calls(3); got != 61 {
		t.Errorf("node 3 (1 h idle timeout) probed %d times, want 61", got)
	}
	before := calls(1)
	h.e.Selected("auto")
	health.Settle(h.e) // no clock advance: the probe runs at once
	if got := calls(1); got != before+1 {
		t.Fatalf("Selected did not wake node 1 at once (%d probes, want %d)", got, before+1)
	}
	h.step(time.Minute, 5*time.Second)
	if got := calls(1); got != before+3 {
		t.Errorf("after waking: %d probes in a minute, want 2 more", got-before-1)
	}
	// Selections of an awake group do not probe anything extra.
	n := calls(1)
	h.e.Selected("auto")
	health.Settle(h.e)
	if calls(1) != n {
		t.Error("a selection of an awake group probed")
	}
	h.e.Selected("missing") // unknown group: nothing
}

// Probe concurrency never exceeds MaxConcurrentProbes, all kinds together.
func TestProbeConcurrencyBound(t *testing.T) {
	const limit = 7
	h := newHarness(t, func(o *health.Options) { o.MaxConcurrentProbes = limit })
	var g healthtest.Gauge
	nodes := make([]health.Node, 60)
	probers := make([]*healthtest.Prober, len(nodes))
	for i := range nodes {
		probers[i] = &healthtest.Prober{Gauge: &g}
		probers[i].Block()
		nodes[i] = health.Node{ID: id(i + 1), Name: name(i + 1), Prober: probers[i], UDP: true}
	}
	h.e.Sync(nodes)
	h.e.Start()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.e.ProbeNow(context.Background()) // competes for the same bound
	}()
	waitFor(t, func() bool { return g.Current() == limit })
	time.Sleep(20 * time.Millisecond)
	if g.Peak() > limit {
		t.Fatalf("peak %d probes in flight, bound %d", g.Peak(), limit)
	}
	for _, p := range probers {
		p.Unblock()
	}
	<-done
	health.Settle(h.e)
	if g.Peak() != limit {
		t.Errorf("peak %d, want exactly the bound %d", g.Peak(), limit)
	}
	if tcp, udp := probers[0].Calls(); tcp < 1 || udp < 1 {
		t.Errorf("node probed tcp=%d udp=%d", tcp, udp)
	}
}

// DelayMany runs at most 10 tests at a time, and returns in order.
func TestDelayManyBound(t *testing.T) {
	h := newHarness(t, func(o *health.Options) { o.MaxConcurrentProbes = 50 })
	var g healthtest.Gauge
	ids := make([]health.NodeID, 30)
	nodes := make([]health.Node, len(ids))
	probers := make([]*healthtest.Prober, len(ids))
	for i := range ids {
		ids[i] = id(i + 1)
		probers[i] = &healthtest.Prober{Gauge: &g}
		probers[i].Block()
		probers[i].SetTCP(healthtest.OK(time.Duration(i+1) * time.Millisecond))
		nodes[i] = health.Node{ID: ids[i], Name: name(i + 1), Prober: probers[i]}
	}
	probers[4].SetTCP(healthtest.Fail())
	h.e.Sync(nodes)
	var out []health.DelayResult
	done := make(chan struct{})
	go func() {
		defer close(done)
		out = h.e.DelayMany(context.Background(), append(ids, id(999)), "", time.Second)
	}()
	waitFor(t, func() bool { return g.Current() == health.DelayConcurrency })
	time.Sleep(20 * time.Millisecond)
	if g.Current() != health.DelayConcurrency {
		t.Fatalf("%d delay tests in flight, want %d", g.Current(), health.DelayConcurrency)
	}
	for _, p := range probers {
		p.Unblock()
	}
	<-done
	if g.Peak() != health.DelayConcurrency {
		t.Errorf("peak %d", g.Peak())
	}
	if len(out) != len(ids)+1 {
		t.Fatalf("%d results", len(out))
	}
	for i, r := range out[:len(ids)] {
		if r.ID != ids[i] || (i == 4) != (r.Err != nil) || (i != 4 && r.Result.RTT != time.Duration(i+1)*time.Millisecond) {
			t.Errorf("result %d: %+v", i, r)
		}
	}
	if out[len(ids)].Err == nil {
		t.Error("an unknown node's delay test succeeded")
	}
	if url, m := probers[0].LastTCP(); url != health.DefaultDelayURL || m != "HEAD" {
		t.Errorf("delay test sent %s %s", m, url)
	}
	// Recorded like a probe.
	if got, ok := h.e.Latency(ids[2], health.TCP, v4); !ok || got != 3*time.Millisecond {
		t.Errorf("delay test not recorded: %v %v", got, ok)
	}
	if got := h.state(5).Of(health.TCP, v4).ProbeFailures; got != 1 {
		t.Errorf("a failed delay test in the grace counted %d (forced: want 1)", got)
	}
}

// Stop cancels probes in flight, waits for every goroutine, records nothing
// of the cancelled probes, and makes later on-demand probes return at once.
func TestStopCancelsAndWaits(t *testing.T) {
	h := newHarness(t, nil)
	h.register(5)
	for i := 1; i <= 5; i++ {
		h.p(i).Block()
	}
	h.e.Start()
	waitFor(t, func() bool { tcp, _ := h.p(5).Calls(); return tcp == 1 })
	h.e.Stop()
	for i := 1; i <= 5; i++ {
		if s := h.state(i).Of(health.TCP, v4); s.Observed {
			t.Errorf("node %d: a cancelled probe was recorded", i)
		}
	}
	h.e.ProbeNow(context.Background())
	if _, err := h.e.Delay(context.Background(), id(1), "", 0); err == nil {
		t.Error("Delay after Stop succeeded")
	}
	h.e.Stop() // idempotent
	h.e.Start()
	if tcp, _ := h.p(1).Calls(); tcp != 1 {
		t.Errorf("probes after Stop: %d calls", tcp)
	}
}

// A probe that outlives CheckTimeout on the engine's clock is a failure.
func TestProbeTimeout(t *testing.T) {
	h := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = nil })
	h.register(1)
	h.p(1).Block()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.e.ProbeNow(context.Background(), id(1))
	}()
	waitFor(t, func() bool { tcp, _ := h.p(1).Calls(); return tcp == 1 && h.clk.Timers() == 1 })
	h.clk.Advance(health.DefaultCheckTimeout)
	<-done
	if s := h.state(1).Of(health.TCP, v4); s.ProbeFailures != 1 {
		t.Errorf("a timed-out probe: failures %d", s.ProbeFailures)
	}
	if h.clk.Timers() != 0 {
		t.Errorf("%d timers left", h.clk.Timers())
	}
}

// waitFor polls cond for up to 5 s of real time.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
}
