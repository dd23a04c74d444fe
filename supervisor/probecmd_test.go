package supervisor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/spec"
)

// checkServer is a generate_204 endpoint for the probes' tcp_check_url.
func checkServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/generate_204"
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// countingListener accepts and closes connections, counting them; with
// hold it keeps them open, silent, until the test ends.
func countingListener(t *testing.T, hold bool) (string, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	done := make(chan struct{})
	var held []net.Conn
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			n.Add(1)
			if hold {
				held = append(held, c)
			} else {
				c.Close()
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
	})
	return ln.Addr().String(), &n
}

// probeSpec has a working node "good" (direct), a dead one "bad" (a SOCKS
// server on a closed port), an unused "spare" and block, with the local
// check URL; groups are the caller's.
func probeSpec(t *testing.T, groups ...spec.Group) *spec.Spec {
	s := baseSpec()
	s.Outbounds = []spec.Outbound{
		{Tag: "bad", Type: "socks", Server: closedPort(t), AddressFamily: "auto", UDP: true},
		{Tag: "good", Type: "direct", AddressFamily: "auto", UDP: true},
		{Tag: "spare", Type: "direct", AddressFamily: "auto", UDP: true},
		{Tag: "block", Type: "block", UDP: true},
	}
	s.Health = spec.Health{
		TCPCheckURLs:   []string{checkServer(t)},
		TCPCheckMethod: "HEAD",
		CheckInterval:  30 * time.Second,
		CheckTimeout:   3 * time.Second,
		IdleTimeout:    30 * time.Minute,
	}
	s.Groups = groups
	s.Route.Final = "good"
	return s
}

func runProbe(t *testing.T, s *spec.Spec, tags ...string) *ProbeReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rep, err := Probe(ctx, s, tags, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func names(rep *ProbeReport) (nodes, groups []string) {
	for _, n := range rep.Nodes {
		nodes = append(nodes, n.Name)
	}
	for _, g := range rep.Groups {
		groups = append(groups, g.Tag)
	}
	return nodes, groups
}

func node(t *testing.T, rep *ProbeReport, name string) ProbeNode {
	t.Helper()
	for _, n := range rep.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("node %s not in the report", name)
	return ProbeNode{}
}

// One cycle of a urltest group over a working and a dead node: the working
// one answered with an RTT, the dead one failed with its error, and the
// group picks the working one on both networks.
func TestProbeReportsNodesAndTheGroupsPick(t *testing.T) {
	rep := runProbe(t, probeSpec(t, spec.Group{Tag: "auto", Policy: "urltest", Members: []string{"bad", "good"}, Tolerance: 50 * time.Millisecond}))
	if n, g := names(rep); !slices.Equal(n, []string{"bad", "good"}) || !slices.Equal(g, []string{"auto"}) {
		t.Fatalf("nodes %v, groups %v", n, g)
	}
	good := node(t, rep, "good")
	if obs, ok := good.Verdict(health.TCP, netx.V4); !obs || !ok || !good.Answered() || good.TCPErr != nil {
		t.Fatalf("good: tcp4 observed %v ok %v, error %v", obs, ok, good.TCPErr)
	}
	if rtt, ok := good.RTT(); !ok || rtt <= 0 {
		t.Fatalf("good: rtt %v %v", rtt, ok)
	}
	if h := good.State.Of(health.TCP, netx.V4).Display(); len(h) != 1 || h[0].Delay <= 0 {
		t.Fatalf("good: history %+v, want the one probe just made", h)
	}
	if obs, _ := good.Verdict(health.TCP, netx.V6); obs {
		t.Fatal("good: tcp6 observed, but the probe went over IPv4")
	}
	bad := node(t, rep, "bad")
	if obs, ok := bad.Verdict(health.TCP, netx.V4); !obs || ok || bad.Answered() || bad.TCPErr == nil {
		t.Fatalf("bad: tcp4 observed %v ok %v, error %v", obs, ok, bad.TCPErr)
	}
	if _, ok := bad.RTT(); ok {
		t.Fatal("bad: an RTT")
	}
	g := rep.Groups[0]
	if g.Policy != "urltest" {
		t.Fatalf("policy %q", g.Policy)
	}
	for _, nw := range []netx.Network{netx.TCP, netx.UDP} {
		x := g.Explain[nw]
		if x.Leaf != "good" || !slices.Equal(g.Chain[nw], []string{"auto", "good"}) || x.Sentence == "" {
			t.Fatalf("%s: leaf %q chain %v sentence %q", nw, x.Leaf, g.Chain[nw], x.Sentence)
		}
	}
	if x := g.Explain[netx.TCP]; x.Reason != group.ReasonLowest || x.Candidates[0].Excluded != group.ExclusionDead {
		t.Fatalf("tcp: reason %q, bad excluded %q", x.Reason, x.Candidates[0].Excluded)
	}
}

// A state that failed its probe in the cycle reads dead to the groups,
// although one failure would not kill it in a running engine: a fallback
// whose first member failed serves the next.
func TestProbeGroupsReadTheCyclesFailuresAsDead(t *testing.T) {
	rep := runProbe(t, probeSpec(t, spec.Group{Tag: "fb", Policy: "fallback", Members: []string{"bad", "good"}}))
	g := rep.Groups[0]
	if x := g.Explain[netx.TCP]; x.Leaf != "good" || !slices.Equal(g.Chain[netx.TCP], []string{"fb", "good"}) {
		t.Fatalf("tcp: leaf %q chain %v: %s", x.Leaf, g.Chain[netx.TCP], x.Sentence)
	}
	// No UDP state: UDP inherits the TCP verdict.
	if x := g.Explain[netx.UDP]; x.Leaf != "good" {
		t.Fatalf("udp: leaf %q: %s", x.Leaf, x.Sentence)
	}
}

// A named group probes the leaves it reaches (finals included) and only
// those, and is the only group reported.
func TestProbeOfANamedGroupProbesItsLeavesOnly(t *testing.T) {
	other, accepts := countingListener(t, false)
	s := probeSpec(t,
		spec.Group{Tag: "a", Policy: "fallback", Members: []string{"good"}, Final: "spare"},
		spec.Group{Tag: "b", Policy: "fallback", Members: []string{"other"}},
	)
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "other", Type: "socks", Server: other, AddressFamily: "auto"})
	rep := runProbe(t, s, "a")
	if n, g := names(rep); !slices.Equal(n, []string{"good", "spare"}) || !slices.Equal(g, []string{"a"}) {
		t.Fatalf("nodes %v, groups %v", n, g)
	}
	if accepts.Load() != 0 {
		t.Fatal("the node of another group was probed")
	}
	rep = runProbe(t, s, "b")
	if n, _ := names(rep); !slices.Equal(n, []string{"other"}) || accepts.Load() == 0 {
		t.Fatalf("nodes %v, %d connections to other's server", n, accepts.Load())
	}
}

// With no tag every leaf a group reaches is probed; an outbound no group
// holds is probed when named.
func TestProbeSelection(t *testing.T) {
	s := probeSpec(t, spec.Group{Tag: "auto", Policy: "urltest", Members: []string{"bad", "good", "block"}})
	if n, _ := names(runProbe(t, s)); !slices.Equal(n, []string{"bad", "good"}) {
		t.Fatalf("no tag: nodes %v", n)
	}
	rep := runProbe(t, s, "spare")
	if n, g := names(rep); !slices.Equal(n, []string{"spare"}) || len(g) != 0 || !rep.Nodes[0].Answered() {
		t.Fatalf("spare: nodes %v groups %v, answered %v", n, g, rep.Nodes[0].Answered())
	}
	// Without groups: every outbound but block.
	if n, g := names(runProbe(t, probeSpec(t))); !slices.Equal(n, []string{"bad", "good", "spare"}) || len(g) != 0 {
		t.Fatalf("no groups: nodes %v groups %v", n, g)
	}
}

// A balancer named is its members; a balancer a group reaches brings its
// members too.
func TestProbeOfABalancerProbesItsMembers(t *testing.T) {
	up, _ := countingListener(t, false)
	s := probeSpec(t, spec.Group{Tag: "g", Policy: "fallback", Members: []string{"lb"}})
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "up", Type: "socks", Server: up, AddressFamily: "auto"})
	s.Balancers = []spec.Balancer{{Tag: "lb", Members: []string{"bad", "up"}, Strategy: "failover", ProbeInterval: time.Minute, ProbeTimeout: time.Second}}
	for _, tag := range []string{"lb", "g"} {
		if n, _ := names(runProbe(t, s, tag)); !slices.Equal(n, []string{"bad", "up"}) {
			t.Fatalf("%s: nodes %v", tag, n)
		}
	}
}

func TestProbeRefusesUnknownAndBlockTags(t *testing.T) {
	s := probeSpec(t)
	if _, err := Probe(context.Background(), s, []string{"nope"}, nil); !errors.Is(err, ErrUnknownTag) {
		t.Fatalf("unknown tag: %v", err)
	}
	if _, err := Probe(context.Background(), s, []string{"block"}, nil); !errors.Is(err, ErrBlockTag) {
		t.Fatalf("block: %v", err)
	}
}

// The context bounds the cycle: a node whose server never answers is
// reported as not answering once it ends, and Probe returns then.
func TestProbeEndsWithItsContext(t *testing.T) {
	silent, _ := countingListener(t, true)
	s := probeSpec(t)
	s.Health.CheckTimeout = 20 * time.Second
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "silent", Type: "socks", Server: silent, AddressFamily: "auto"})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	rep, err := Probe(ctx, s, []string{"silent", "good"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v", d)
	}
	n := node(t, rep, "silent")
	if n.Answered() || n.TCPErr == nil {
		t.Fatalf("silent: answered %v, error %v", n.Answered(), n.TCPErr)
	}
	if !node(t, rep, "good").Answered() {
		t.Fatal("good did not answer")
	}
}
