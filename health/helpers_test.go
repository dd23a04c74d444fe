package health_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

var (
	v4 = netx.V4
	v6 = netx.V6
)

// id returns a distinct NodeID per i.
func id(i int) health.NodeID {
	var n health.NodeID
	n[0], n[1], n[15] = byte(i>>8), byte(i), 0xaa
	return n
}

var dnsServer = netx.AddrFromAddrPort(netip.MustParseAddrPort("1.1.1.1:53"))

// logBuf collects log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// harness is an engine on a fake clock with recorded callbacks.
type harness struct {
	t      *testing.T
	clk    *healthtest.Clock
	e      *health.Engine
	log    *logBuf
	probes map[health.NodeID]*healthtest.Prober

	mu      sync.Mutex
	deaths  []string // "name" per OnDeath
	changes []health.NodeID
}

// newHarness builds an engine; opt adjusts the options first. Nodes are
// registered with register.
func newHarness(t *testing.T, opt func(*health.Options)) *harness {
	t.Helper()
	h := &harness{t: t, clk: healthtest.NewClock(healthtest.Epoch), log: &logBuf{}, probes: map[health.NodeID]*healthtest.Prober{}}
	o := health.Options{
		Clock:       h.clk,
		UDPCheckDNS: []netx.Addr{dnsServer},
		Log:         slog.New(slog.NewTextHandler(h.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		OnDeath: func(id health.NodeID, name string) {
			h.mu.Lock()
			h.deaths = append(h.deaths, name)
			h.mu.Unlock()
		},
		OnChange: func(id health.NodeID) {
			h.mu.Lock()
			h.changes = append(h.changes, id)
			h.mu.Unlock()
		},
	}
	if opt != nil {
		opt(&o)
	}
	h.e = health.New(o)
	t.Cleanup(h.e.Stop)
	return h
}

// register registers nodes 1..n (names n1...), UDP-capable, each with its
// own prober, replacing the registered set.
func (h *harness) register(n int) {
	nodes := make([]health.Node, 0, n)
	for i := 1; i <= n; i++ {
		p := h.probes[id(i)]
		if p == nil {
			p = &healthtest.Prober{}
			h.probes[id(i)] = p
		}
		nodes = append(nodes, health.Node{ID: id(i), Name: name(i), Prober: p, UDP: true, Incarnation: 1})
	}
	h.e.Sync(nodes)
}

func name(i int) string { return "n" + itoa(i) }

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func (h *harness) p(i int) *healthtest.Prober { return h.probes[id(i)] }

// pastGrace advances the clock (before Start) beyond the grace.
func (h *harness) pastGrace() { h.clk.Advance(health.Grace) }

// probe runs one forced cycle of node i.
func (h *harness) probe(i int) { h.e.ProbeNow(context.Background(), id(i)) }

// start starts the runner and lets its first cycle finish.
func (h *harness) start() {
	h.e.Start()
	health.Settle(h.e)
}

// step advances the clock by d in pieces of at most piece, letting the
// engine settle after each.
func (h *harness) step(d, piece time.Duration) {
	for d > 0 {
		s := min(d, piece)
		h.clk.Advance(s)
		health.Settle(h.e)
		d -= s
	}
}

func (h *harness) deathsSeen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.deaths...)
}

func (h *harness) changesSeen() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.changes)
}

func (h *harness) state(i int) health.NodeState {
	h.t.Helper()
	s, ok := h.e.State(id(i))
	if !ok {
		h.t.Fatalf("node %d not registered", i)
	}
	return s
}

func (h *harness) wantLog(sub string) {
	h.t.Helper()
	if !strings.Contains(h.log.String(), sub) {
		h.t.Errorf("log lacks %q:\n%s", sub, h.log.String())
	}
}

func (h *harness) alive(i int, d health.Domain, f netx.Family) bool { return h.e.Alive(id(i), d, f) }
