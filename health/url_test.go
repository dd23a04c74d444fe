package health_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
)

// urlProber answers TCP probes by URL.
type urlProber struct {
	healthtest.Prober
	mu  sync.Mutex
	by  map[string]healthtest.Outcome
	got []string
}

func (p *urlProber) set(url string, o healthtest.Outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string]healthtest.Outcome{}
	}
	p.by[url] = o
}

func (p *urlProber) TCP(ctx context.Context, url, method string) (health.Result, error) {
	p.mu.Lock()
	o, ok := p.by[url]
	p.got = append(p.got, url)
	p.mu.Unlock()
	if !ok {
		return p.Prober.TCP(ctx, url, method)
	}
	if o.Err != nil {
		return health.Result{}, o.Err
	}
	return health.Result{RTT: o.RTT, Family: o.Family}, nil
}

// Per-group check_url: keyed by (member tag, url), recorded under the
// member even when probed through its current leaf, TCP only, dies after 3
// failures, two-success recovery, the set replaced every cycle.
func TestURLTargets(t *testing.T) {
	var mu sync.Mutex
	targets := []health.URLTarget{
		{Member: "sub", URL: "https://check.example/a", Node: id(1)},
		{Member: "n2", URL: "https://check.example/a", Node: id(2)},
	}
	h := newHarness(t, func(o *health.Options) {
		o.UDPCheckDNS = nil
		o.URLTargets = func() []health.URLTarget {
			mu.Lock()
			defer mu.Unlock()
			return append([]health.URLTarget(nil), targets...)
		}
	})
	p1, p2 := &urlProber{}, &urlProber{}
	p1.set("https://check.example/a", healthtest.OK(40*time.Millisecond))
	p2.set("https://check.example/a", healthtest.Fail())
	h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: p1}, {ID: id(2), Name: "n2", Prober: p2}})
	if !h.e.URLAlive("sub", "https://check.example/a") {
		t.Fatal("a check_url state not probed yet is not alive")
	}
	h.clk.Advance(health.Grace)
	h.start()
	if got, ok := h.e.URLLatency("sub", "https://check.example/a"); !ok || got != 40*time.Millisecond {
		t.Fatalf("sub latency %v %v", got, ok)
	}
	if _, ok := h.e.URLLatency("n1", "https://check.example/a"); ok {
		t.Error("recorded under the leaf's tag, not the member's")
	}
	if _, ok := h.e.Latency(id(1), health.TCP, v4); !ok {
		t.Error("the global probe of n1 did not run")
	}
	h.step(60*time.Second, 5*time.Second)
	if h.e.URLAlive("n2", "https://check.example/a") {
		t.Fatal("check_url state alive after 3 failures")
	}
	if !h.e.Alive(id(2), health.TCP, v4) {
		t.Error("a check_url failure killed the node's own TCP state")
	}
	h.wantLog("check_url https://check.example/a of n2 dead after 3 probe failures")

	// The sub-group's pick changes: same state, probed through the new leaf.
	p2.set("https://check.example/a", healthtest.OK(10*time.Millisecond))
	mu.Lock()
	targets[0].Node = id(2)
	mu.Unlock()
	h.step(30*time.Second, 5*time.Second)
	if s, leaf, ok := h.e.URLState("sub", "https://check.example/a"); !ok || leaf != id(2) || len(s.History) != 4 {
		t.Errorf("sub state %+v leaf %v ok %v", s, leaf, ok)
	}
	// n2 recovers after two successes: recovery scheduler and cycle.
	if !h.e.URLAlive("n2", "https://check.example/a") {
		h.step(30*time.Second, 5*time.Second)
	}
	if !h.e.URLAlive("n2", "https://check.example/a") {
		t.Error("check_url state did not recover")
	}
	h.wantLog("check_url https://check.example/a of n2 alive again")

	// The set is replaced: an entry no longer returned is dropped.
	mu.Lock()
	targets = targets[:1]
	mu.Unlock()
	e0 := h.e.Epoch()
	h.step(30*time.Second, 5*time.Second)
	if _, _, ok := h.e.URLState("n2", "https://check.example/a"); ok {
		t.Error("a dropped check_url state is kept")
	}
	if h.e.Epoch() == e0 {
		t.Error("the set change did not move the epoch")
	}
}
