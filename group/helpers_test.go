package group_test

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
	"switchyard/spec"
)

// nop is a trivial outbound: the tests never dial.
type nop struct{}

func (nop) DialStream(context.Context, netx.Flow) (net.Conn, error) { return nil, outbound.ErrBlocked }
func (nop) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, outbound.ErrNoUDP
}

// node is the NodeID of a test tag (its bytes, then the salt).
func node(tag string, salt byte) health.NodeID {
	var id health.NodeID
	copy(id[:15], tag)
	id[15] = salt
	return id
}

// leaves are UDP-capable test leaves, each its own node; "block" is a
// block leaf without a node.
func leaves(tags ...string) map[string]group.Leaf {
	out := make(map[string]group.Leaf, len(tags))
	for _, tag := range tags {
		l := group.Leaf{Tag: tag, Node: node(tag, 1), Target: plane.NewTarget(plane.OutboundID{Tag: tag, Version: 1}, nop{}), UDP: true}
		if tag == "block" {
			l.Node, l.Block = health.NodeID{}, true
		}
		out[tag] = l
	}
	return out
}

type hkey struct {
	n health.NodeID
	d health.Domain
	f netx.Family
}

// fakeHealth is a Health whose every node is alive and unmeasured until
// a test says otherwise. Every write moves the epoch unless said.
type fakeHealth struct {
	mu       sync.Mutex
	dead     map[hkey]bool
	udpSet   map[hkey]bool
	lat      map[hkey]time.Duration
	urlLat   map[[2]string]time.Duration
	urlDead  map[[2]string]bool
	strikes  map[health.NodeID]int
	selected map[string]int
	epoch    atomic.Uint64
}

func newHealth() *fakeHealth {
	return &fakeHealth{
		dead: map[hkey]bool{}, udpSet: map[hkey]bool{}, lat: map[hkey]time.Duration{},
		urlLat: map[[2]string]time.Duration{}, urlDead: map[[2]string]bool{},
		strikes: map[health.NodeID]int{}, selected: map[string]int{},
	}
}

func (h *fakeHealth) set(tag string, d health.Domain, f netx.Family, alive bool) {
	h.mu.Lock()
	k := hkey{node(tag, 1), d, f}
	h.dead[k] = !alive
	if d != health.TCP {
		h.udpSet[k] = true
	}
	h.mu.Unlock()
	h.epoch.Add(1)
}

// kill marks tag's TCP dead on both families.
func (h *fakeHealth) kill(tag string) {
	h.set(tag, health.TCP, netx.V4, false)
	h.set(tag, health.TCP, netx.V6, false)
}

func (h *fakeHealth) revive(tag string) {
	h.set(tag, health.TCP, netx.V4, true)
	h.set(tag, health.TCP, netx.V6, true)
}

func (h *fakeHealth) latency(tag string, d health.Domain, ms int) {
	h.mu.Lock()
	h.lat[hkey{node(tag, 1), d, netx.V4}] = time.Duration(ms) * time.Millisecond
	h.mu.Unlock()
	h.epoch.Add(1)
}

func (h *fakeHealth) url(member, url string, ms int, alive bool) {
	h.mu.Lock()
	if ms > 0 {
		h.urlLat[[2]string{member, url}] = time.Duration(ms) * time.Millisecond
	}
	h.urlDead[[2]string{member, url}] = !alive
	h.mu.Unlock()
	h.epoch.Add(1)
}

func (h *fakeHealth) strike(tag string, n int) {
	h.mu.Lock()
	h.strikes[node(tag, 1)] = n
	h.mu.Unlock()
	h.epoch.Add(1)
}

func (h *fakeHealth) selections(g string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.selected[g]
}

func (h *fakeHealth) Alive(id health.NodeID, d health.Domain, f netx.Family) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.dead[hkey{id, d, f}]
}

func (h *fakeHealth) UDPEligible(id health.NodeID, f netx.Family) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	data, dns := hkey{id, health.DataUDP, f}, hkey{id, health.DNSUDP, f}
	if !h.udpSet[data] && !h.udpSet[dns] {
		return !h.dead[hkey{id, health.TCP, f}]
	}
	return !h.dead[data] || !h.dead[dns]
}

func (h *fakeHealth) HasUDPState(id health.NodeID, f netx.Family) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.udpSet[hkey{id, health.DataUDP, f}] || h.udpSet[hkey{id, health.DNSUDP, f}]
}

func (h *fakeHealth) Latency(id health.NodeID, d health.Domain, f netx.Family) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.lat[hkey{id, d, f}]
	return l, ok
}

func (h *fakeHealth) URLLatency(member, url string) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.urlLat[[2]string{member, url}]
	return l, ok
}

func (h *fakeHealth) URLAlive(member, url string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.urlDead[[2]string{member, url}]
}

func (h *fakeHealth) Strikes(id health.NodeID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.strikes[id]
}

func (h *fakeHealth) Epoch() uint64 { return h.epoch.Load() }

func (h *fakeHealth) Selected(g string) {
	h.mu.Lock()
	h.selected[g]++
	h.mu.Unlock()
}

// clock is a settable Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 10, 2, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// logs records what the manager logs.
type logs struct {
	mu      sync.Mutex
	records []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Level.String()+" "+r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

func (l *logs) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if strings.Contains(r, substr) {
			n++
		}
	}
	return n
}

// env is one test's manager and what it was built with.
type env struct {
	t        *testing.T
	m        *group.Manager
	h        *fakeHealth
	clock    *clock
	logs     *logs
	warnings []string
	leaves   map[string]group.Leaf
}

type option func(*group.Options)

// build makes a manager over groups and leaves; it is closed with the test.
func build(t *testing.T, groups []spec.Group, ls map[string]group.Leaf, opts ...option) *env {
	t.Helper()
	e := &env{t: t, h: newHealth(), clock: newClock(), logs: &logs{}, leaves: ls}
	o := group.Options{Health: e.h, Log: slog.New(e.logs), Now: e.clock.Now}
	for _, fn := range opts {
		fn(&o)
	}
	m, warnings, err := group.New(groups, nil, ls, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	e.m, e.warnings = m, warnings
	return e
}

// pick resolves group for a network and family as the plane does and
// returns the leaf's tag ("" when refused) and the chain.
func (e *env) pick(tag string, n netx.Network, f netx.Family) (string, []string) {
	e.t.Helper()
	return resolve(e.t, e.m.Target(tag), n, f, nil)
}

func (e *env) tcp(tag string) string {
	e.t.Helper()
	l, _ := e.pick(tag, netx.TCP, netx.V4)
	return l
}

func (e *env) udp(tag string) string {
	e.t.Helper()
	l, _ := e.pick(tag, netx.UDP, netx.V4)
	return l
}

func resolve(t *testing.T, target *plane.Target, n netx.Network, f netx.Family, prefer *plane.OutboundID) (string, []string) {
	t.Helper()
	if target == nil {
		t.Fatal("no such target")
	}
	q := plane.Query{Network: n, Family: f, Prefer: prefer}
	l := target.Resolve(&q)
	if l == nil {
		return "", nil
	}
	return l.ID().Tag, q.Path()
}

func sel(tag string, members ...string) spec.Group {
	return spec.Group{Tag: tag, Policy: "selector", Members: members, Interrupt: true}
}

func auto(policy, tag string, members ...string) spec.Group {
	return spec.Group{Tag: tag, Policy: policy, Members: members}
}

func withFinal(g spec.Group, final string) spec.Group {
	g.Final = final
	return g
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
