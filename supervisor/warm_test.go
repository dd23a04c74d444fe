package supervisor

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/internal/testcert"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
	"switchyard/warm"
)

// trojanServer is a loopback Trojan server over TLS that relays CONNECT
// requests to their destination and remembers every connection it
// accepted, and whether a request came on it.
type trojanServer struct {
	ln        net.Listener
	wg        sync.WaitGroup
	probePort atomic.Uint32 // requests to this port are health probes

	mu    sync.Mutex
	conns []*trojanConn
}

type trojanConn struct {
	c         net.Conn
	requested atomic.Bool
	probe     atomic.Bool // a request for the health probes' endpoint
}

func newTrojanServer(t *testing.T) *trojanServer {
	t.Helper()
	cfg := &tls.Config{Certificates: []tls.Certificate{testcert.New(t, "trojan.test").Certificate}}
	ln, err := tls.Listen("tcp4", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &trojanServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := &trojanConn{c: c}
			s.mu.Lock()
			s.conns = append(s.conns, tc)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				s.serve(tc)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// serve reads the request (the key's 56 hex digits, CRLF, the command,
// an IPv4 address and port, CRLF) and relays the stream to the address.
func (s *trojanServer) serve(tc *trojanConn) {
	r := bufio.NewReader(tc.c)
	head := make([]byte, 56+2+1+1+4+2+2)
	if _, err := io.ReadFull(r, head); err != nil {
		return
	}
	port := binary.BigEndian.Uint16(head[64:66])
	tc.probe.Store(uint32(port) == s.probePort.Load())
	tc.requested.Store(true)
	if head[58] != 1 || head[59] != 1 {
		return // only CONNECT to an IPv4 address
	}
	ip := netip.AddrFrom4([4]byte(head[60:64]))
	up, err := net.Dial("tcp4", netip.AddrPortFrom(ip, port).String())
	if err != nil {
		return
	}
	defer up.Close()
	go func() { io.Copy(up, r); up.Close() }()
	io.Copy(tc.c, up)
}

// accepted is how many connections the server accepted, and how many of
// them carried a request; the health probes' connections are not counted.
func (s *trojanServer) accepted() (n, requested int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		switch {
		case c.probe.Load():
		case c.requested.Load():
			n++
			requested++
		default:
			n++
		}
	}
	return n, requested
}

// closeIdle closes, server side, every connection no request came on: a
// server's handshake timeout.
func (s *trojanServer) closeIdle() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.conns {
		if !c.requested.Load() {
			c.c.Close()
			n++
		}
	}
	return n
}

// trojanSpec routes everything through a selector over one Trojan node
// "tj" (and direct) to the server at addr; the probes ask check.
func trojanSpec(addr, check string, w spec.Warmup) *spec.Spec {
	s := baseSpec()
	s.Outbounds = append([]spec.Outbound{{Tag: "tj", Type: "trojan", Server: addr, Password: "secret", UDP: true,
		AddressFamily: "auto", TLS: &spec.TLS{ServerName: "trojan.test", Insecure: true}}}, s.Outbounds...)
	s.Groups = []spec.Group{{Tag: "pick", Policy: "selector", Members: []string{"tj", "direct"}}}
	s.Route.Final = "pick"
	s.Health = spec.Health{TCPCheckURLs: []string{check}, CheckInterval: time.Hour, CheckTimeout: time.Second}
	s.Warmup = w
	return s
}

// trojanRig is a supervisor over trojanSpec, on a fake clock, once its
// first probe found the node alive (no probe runs after it: the check
// interval is an hour of the fake clock).
type trojanRig struct {
	sv    *Supervisor
	srv   *trojanServer
	clock *healthtest.Clock
	check string
	id    health.NodeID
}

func newTrojanRig(t *testing.T, w spec.Warmup) *trojanRig {
	t.Helper()
	r := &trojanRig{srv: newTrojanServer(t), clock: healthtest.NewClock(healthtest.Epoch), check: checkServer(t)}
	u, err := url.Parse(r.check)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	r.srv.probePort.Store(uint32(port))
	r.sv, _ = run(t, r.spec(w), Options{clock: r.clock})
	r.id, _ = r.sv.NodeID("tj")
	waitFor(t, "the first probe", func() bool { return r.srv.probed() && r.sv.engine.Load().Alive(r.id, health.TCP, netx.V4) })
	return r
}

// probed reports whether a health probe came through the server.
func (s *trojanServer) probed() bool { return s.probes() > 0 }

// probes counts the health probes that came through the server.
func (s *trojanServer) probes() (n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		if c.probe.Load() {
			n++
		}
	}
	return n
}

func (r *trojanRig) spec(w spec.Warmup) *spec.Spec {
	return trojanSpec(r.srv.ln.Addr().String(), r.check, w)
}

// flowThrough opens a flow to a TCP echo through sv and checks it echoes.
func flowThrough(t *testing.T, sv *Supervisor) {
	t.Helper()
	dst, err := netx.ParseAddr(tcpEcho(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := sv.conn.ConnectStream(ctx, netx.Flow{Network: netx.TCP, Dst: dst, Inbound: "socks-in"})
	if err != nil {
		t.Fatalf("the flow failed: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 4)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo: %q, %v", b, err)
	}
}

func pooledOf(sv *Supervisor, tag string) int {
	st, _ := sv.WarmNode(tag)
	return st.Pooled
}

// The Selector's choice keeps one pooled connection; a flow takes it (no
// new connection at the server) and, being a pool hit, leaves the dial
// EMA alone.
func TestSelectorPinPoolsAConnectionAFlowTakes(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{SelectorPin: true})
	sv, srv := r.sv, r.srv
	waitFor(t, "the pinned connection", func() bool { return pooledOf(sv, "tj") == 1 })
	st, _ := sv.WarmNode("tj")
	if st.Owners != warm.OwnSelector || st.Kind != outbound.WarmPool {
		t.Fatalf("warm state %+v", st)
	}
	flowThrough(t, sv)
	// The flow ran on the pooled connection; the pool replaced it at once
	// (no request on that one).
	waitFor(t, "the replacement", func() bool { return pooledOf(sv, "tj") == 1 })
	if n, req := srv.accepted(); n != 2 || req != 1 {
		t.Fatalf("server accepted %d connections (%d with a request), want the pooled one and its replacement", n, req)
	}
	id, _ := sv.NodeID("tj")
	ns, _ := sv.engine.Load().State(id)
	if ns.DialEMA != 0 {
		t.Fatalf("a pool hit fed the dial EMA: %v", ns.DialEMA)
	}
}

// A pooled connection the server closed is never handed to a flow: the
// flow succeeds on a fresh one; and the next pass (10 s) pins a new one.
func TestAPooledConnectionClosedByTheServerIsNotUsed(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{SelectorPin: true})
	sv, srv, clock := r.sv, r.srv, r.clock
	waitFor(t, "the pinned connection", func() bool { return pooledOf(sv, "tj") == 1 })
	if n := srv.closeIdle(); n != 1 {
		t.Fatalf("closed %d idle connections, want 1", n)
	}
	time.Sleep(50 * time.Millisecond) // the FIN reaches the client
	flowThrough(t, sv)
	n, req := srv.accepted()
	if n != 2 || req != 1 {
		t.Fatalf("server accepted %d connections (%d with a request), want the closed one and a fresh one", n, req)
	}
	// The pinned state is repaired within one pass.
	clock.Advance(warm.PassInterval)
	waitFor(t, "the repaired pin", func() bool { return pooledOf(sv, "tj") == 1 })
	if n, _ := srv.accepted(); n != 3 {
		t.Fatalf("the repair opened %d connections in all, want 3", n)
	}
}

// The server closes the pinned connection: within one 10 s pass the pin
// has a live one again, without any flow.
func TestSelectorPinRepairsWithinOnePass(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{SelectorPin: true})
	sv, srv, clock := r.sv, r.srv, r.clock
	waitFor(t, "the pinned connection", func() bool { return pooledOf(sv, "tj") == 1 })
	srv.closeIdle()
	time.Sleep(50 * time.Millisecond)
	clock.Advance(warm.PassInterval)
	waitFor(t, "a second connection", func() bool { n, _ := srv.accepted(); return n == 2 })
	waitFor(t, "the repaired pin", func() bool { return pooledOf(sv, "tj") == 1 })
	flowThrough(t, sv)
	// The flow took the repaired connection, which the pool replaced.
	waitFor(t, "the replacement", func() bool { return pooledOf(sv, "tj") == 1 })
	if n, req := srv.accepted(); n != 3 || req != 1 {
		t.Fatalf("server accepted %d (%d with a request): the flow did not take the repaired connection", n, req)
	}
}

// Startup preconnect seeds the pool once and owns nothing.
func TestPreconnectSeedsThePool(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{Preconnect: spec.PreconnectAuto})
	sv, srv := r.sv, r.srv
	waitFor(t, "the seed", func() bool { return pooledOf(sv, "tj") == 1 })
	if st, _ := sv.WarmNode("tj"); st.Owners != 0 {
		t.Fatalf("preconnect owns %v", st.Owners)
	}
	flowThrough(t, sv)
	if n, req := srv.accepted(); n != 1 || req != 1 {
		t.Fatalf("server accepted %d (%d with a request), want the seed only", n, req)
	}
}

// Without [warmup] nothing connects before a flow.
func TestNoWarmupConnectsNothing(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{})
	sv, srv, clock := r.sv, r.srv, r.clock
	clock.Advance(warm.PassInterval)
	time.Sleep(100 * time.Millisecond)
	if n, _ := srv.accepted(); n != 0 || pooledOf(sv, "tj") != 0 {
		t.Fatalf("server accepted %d connections with warm-up off", n)
	}
}

// The node's alive → dead transition purges its pool; the pin refills it
// at the next pass.
func TestNodeDeathPurgesThePool(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{SelectorPin: true})
	sv, clock := r.sv, r.clock
	waitFor(t, "the pinned connection", func() bool { return pooledOf(sv, "tj") == 1 })
	id, _ := sv.NodeID("tj")
	e := sv.engine.Load()
	refused := errors.New("connection refused")
	clock.Advance(health.Grace) // a new node's failures count after its grace
	for range health.TrafficFailuresTCP {
		e.ReportDial(id, netx.V4, 0, false, refused)
	}
	if e.Alive(id, health.TCP, netx.V4) {
		t.Fatalf("the node is still alive after %d failures", health.TrafficFailuresTCP)
	}
	waitFor(t, "the purge", func() bool { return pooledOf(sv, "tj") == 0 })
	// The choice stays pinned, dead or not: the next pass refills it.
	clock.Advance(warm.PassInterval)
	waitFor(t, "the refill", func() bool { return pooledOf(sv, "tj") == 1 })
}

// A reload that keeps the node keeps its runtime and its pool; one that
// changes it gets a fresh runtime.
func TestReloadKeepsAnUnchangedNodesRuntime(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{SelectorPin: true})
	sv, srv := r.sv, r.srv
	waitFor(t, "the pinned connection", func() bool { return pooledOf(sv, "tj") == 1 })
	id, _ := sv.NodeID("tj")
	before := sv.warm.Runtime(id, 1)
	s2 := r.spec(spec.Warmup{SelectorPin: true})
	s2.Outbounds = append(s2.Outbounds, spec.Outbound{Tag: "direct3", Type: "direct", AddressFamily: "auto", UDP: true})
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	if got := sv.warm.Runtime(id, 1); got != before || got.Owners() != warm.OwnSelector || pooledOf(sv, "tj") != 1 {
		t.Fatalf("the unchanged node lost its runtime or its pool")
	}
	if n, _ := srv.accepted(); n != 1 {
		t.Fatalf("the reload reconnected: %d connections", n)
	}
	s3 := r.spec(spec.Warmup{SelectorPin: true})
	s3.Outbounds[0].Password = "another"
	if err := sv.Apply(s3); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the changed node's fresh runtime", func() bool {
		r := sv.warm.Runtime(id, 2)
		return r != nil && r != before && r.Owners() == warm.OwnSelector && pooledOf(sv, "tj") == 1
	})
	if before.Owners() != 0 {
		t.Fatalf("the old version's runtime keeps %v", before.Owners())
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A Selector write moves the pin at once, without a pass's timer: the new
// choice is pooled, the old one's pool purged.
func TestASelectorWriteMovesThePinAtOnce(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{})
	s := r.spec(spec.Warmup{SelectorPin: true})
	second := s.Outbounds[0]
	second.Tag = "tj2"
	s.Outbounds = append(s.Outbounds, second)
	s.Groups[0].Members = []string{"tj", "tj2"}
	if err := r.sv.Apply(s); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the first choice pinned", func() bool { return pooledOf(r.sv, "tj") == 1 })
	if _, err := r.sv.SelectGroup("pick", "tj2", netx.TCP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new choice pinned", func() bool { return pooledOf(r.sv, "tj2") == 1 })
	waitFor(t, "the old choice released", func() bool { st, _ := r.sv.WarmNode("tj"); return st.Owners == 0 && st.Pooled == 0 })
}

func TestUDPRankingOrder(t *testing.T) {
	ms := time.Millisecond
	x := group.Explanation{Policy: "urltest", Leaf: "c", Candidates: []group.Candidate{
		{Member: "a", Leaf: "a", Eligible: true, Measured: true, Latency: 90 * ms},
		{Member: "b", Leaf: "b", Eligible: true, Measured: true, Latency: 20 * ms, Strikes: 1},
		{Member: "c", Leaf: "c", Eligible: true, Measured: true, Latency: 50 * ms},
		{Member: "d", Leaf: "d", Eligible: false, Measured: true, Latency: 5 * ms},
		{Member: "e", Leaf: "e", Eligible: true},
		{Member: "f", Leaf: "f", Eligible: true, Measured: true, Latency: 40 * ms},
		{Member: "lb", Kind: "balancer", Eligible: true, Measured: true, Latency: 1 * ms},
	}}
	// The pick (held within tolerance) first; then by strikes, evidence
	// and average; the ineligible and the balancer left out.
	if got, want := udpRanking(x), []string{"c", "f", "a", "e", "b"}; !slices.Equal(got, want) {
		t.Fatalf("urltest ranking %v, want %v", got, want)
	}
	x.Policy = "fallback"
	if got, want := udpRanking(x), []string{"c", "a", "b", "e", "f"}; !slices.Equal(got, want) {
		t.Fatalf("fallback ranking %v, want %v", got, want)
	}
}

// A reload that turns selector_pin off releases the pinned pool at once.
func TestAReloadOfWarmupApplies(t *testing.T) {
	r := newTrojanRig(t, spec.Warmup{SelectorPin: true})
	waitFor(t, "the pinned connection", func() bool { return pooledOf(r.sv, "tj") == 1 })
	if err := r.sv.Apply(r.spec(spec.Warmup{})); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the release", func() bool { st, _ := r.sv.WarmNode("tj"); return st.Owners == 0 && st.Pooled == 0 })
}

// With 50 poolable nodes and the defaults (preconnect "auto", the pin),
// the warm-up holds 8 connections: the preconnect's 8 nodes, the
// Selector's choice among them; nothing else connects.
func TestWarmupDefaultsBoundWith50Nodes(t *testing.T) {
	r := &trojanRig{srv: newTrojanServer(t), clock: healthtest.NewClock(healthtest.Epoch), check: checkServer(t)}
	u, _ := url.Parse(r.check)
	port, _ := strconv.Atoi(u.Port())
	r.srv.probePort.Store(uint32(port))
	s := r.spec(spec.Warmup{Preconnect: spec.PreconnectAuto, SelectorPin: true})
	node := s.Outbounds[0]
	s.Outbounds = s.Outbounds[1:]
	var members []string
	for i := range 50 {
		n := node
		n.Tag = "n" + strconv.Itoa(i)
		s.Outbounds = append(s.Outbounds, n)
		members = append(members, n.Tag)
	}
	s.Groups = []spec.Group{{Tag: "pick", Policy: "selector", Members: members, Default: "n20"}}
	sv, _ := run(t, s, Options{clock: r.clock})
	pooled := func() (n int) {
		for _, st := range sv.Warm() {
			n += st.Pooled
		}
		return n
	}
	waitFor(t, "the preconnect", func() bool { return pooled() == spec.PreconnectAuto })
	// Read before the pool's idle bound (3 s, real time) lets the
	// deposits expire: the preconnect's 8 nodes, the choice among them.
	st, _ := sv.WarmNode("n20")
	if st.Owners != warm.OwnSelector || st.Pooled != 1 {
		t.Fatalf("the choice n20: %+v", st)
	}
	for _, tag := range []string{"n0", "n6"} { // the first in configuration order after the pick
		if st, _ := sv.WarmNode(tag); st.Pooled != 1 || st.Owners != 0 {
			t.Fatalf("%s: %+v", tag, st)
		}
	}
	if st, _ := sv.WarmNode("n7"); st.Pooled != 0 {
		t.Fatalf("n7, the ninth, was preconnected")
	}
	// The probes connect fresh and leave the pools alone; a probe's
	// connection is told from the others by its request, so count once
	// every first probe has come. Only the pinned pool may have dialed
	// once more since, for the sentinel that learns its server's idle
	// bound (past 3 s on a loaded machine).
	waitFor(t, "every node's first probe", func() bool { return r.srv.probes() >= 50 })
	if n, _ := r.srv.accepted(); n < spec.PreconnectAuto || n > spec.PreconnectAuto+1 {
		t.Fatalf("%d connections after the probes, want %d (one more for a sentinel)", n, spec.PreconnectAuto)
	}
}
