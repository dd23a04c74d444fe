package supervisor

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/group/score"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/test/socksclient"
)

type feedEvent struct {
	what     string
	network  netx.Network
	node     health.NodeID
	rtt      time.Duration
	ok       bool
	interval time.Duration
}

type fakeFeed struct {
	mu     sync.Mutex
	events []feedEvent
}

func (f *fakeFeed) Probe(network netx.Network, node health.NodeID, _ time.Time, rtt time.Duration, ok bool, interval time.Duration) {
	f.mu.Lock()
	f.events = append(f.events, feedEvent{"probe", network, node, rtt, ok, interval})
	f.mu.Unlock()
}

func (f *fakeFeed) NodeDown(node health.NodeID, _ time.Time) {
	f.mu.Lock()
	f.events = append(f.events, feedEvent{what: "down", node: node})
	f.mu.Unlock()
}

// Every TCP probe result reaches the Score engine with the probe
// interval; a TCP death is a node-down; UDP deaths and revivals are not.
// The UDP health probe (DNS), failed or answered, is no Score evidence:
// Score's UDP probe slot carries the QUIC evidence handshake alone.
func TestHealthFeedsTheScoreEngine(t *testing.T) {
	f := &fakeFeed{}
	o := scoreObserver{score: f, interval: 30 * time.Second, now: time.Now}
	var n health.NodeID
	n[0] = 7
	o.Probed(n, "a", health.TCP, netx.V4, 40*time.Millisecond, nil)
	o.Probed(n, "a", health.DNSUDP, netx.V4, 0, errors.New("timeout"))
	o.Probed(n, "a", health.DNSUDP, netx.V4, 9*time.Millisecond, nil)
	scoreQUICFeed(f, 30*time.Second)(n, time.Now(), 25*time.Millisecond, true)
	o.Transition(n, "a", health.TCP, netx.V4, false)
	o.Transition(n, "a", health.DataUDP, netx.V4, false)
	o.Transition(n, "a", health.TCP, netx.V4, true)
	want := []feedEvent{
		{"probe", netx.TCP, n, 40 * time.Millisecond, true, 30 * time.Second},
		{"probe", netx.UDP, n, 25 * time.Millisecond, true, 30 * time.Second},
		{what: "down", node: n},
	}
	if fmt.Sprint(f.events) != fmt.Sprint(want) {
		t.Fatalf("fed %v, want %v", f.events, want)
	}
}

// A running supervisor's Score group ranks with the process's engine,
// configured at publication: flows through it are counted under the
// group's name, and a reload that renames it counts the new name.
func TestAScoreGroupServesFlowsEndToEnd(t *testing.T) {
	text := `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
[[outbounds]]
tag = "d1"
type = "direct"
[[outbounds]]
tag = "d2"
type = "direct"
[[groups]]
tag = "GROUP"
policy = "score"
members = ["d1", "d2"]
[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"
[route]
final = "GROUP"
`
	s, _, err := config.Parse([]byte(strings.ReplaceAll(text, "GROUP", "smart")), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	sv, proxy := run(t, s, Options{})
	dst := tcpEcho(t)
	flows := func(n int) {
		for range n {
			c, err := socksclient.Dial(proxy, dst, "", "")
			if err != nil {
				t.Fatal(err)
			}
			if err := echoOnce(c, "hi"); err != nil {
				t.Fatal(err)
			}
			c.Close()
		}
	}
	flows(3)
	tcpStats := func(name string) (reasons, originals int64) {
		for _, g := range sv.ScoreStats().Groups {
			if g.Group == name && g.Network == "tcp" {
				for _, v := range []int64{g.Reasons.ColdExplore, g.Reasons.PeriodicExplore, g.Reasons.IncumbentIneligible,
					g.Reasons.FreshFailureBypass, g.Reasons.InsufficientEvidenceHeld, g.Reasons.DirectionalTradeoffHeld,
					g.Reasons.IncumbentHeld, g.Reasons.ReliabilityWinner, g.Reasons.PerformanceWinner} {
					reasons += v
				}
				return reasons, g.Budget.Originals
			}
		}
		return -1, -1
	}
	if r, o := tcpStats("smart"); r != 3 || o != 3 {
		t.Fatalf("after three flows: %d reasons, %d originals", r, o)
	}
	s2, _, err := config.Parse([]byte(strings.ReplaceAll(text, "GROUP", "clever")), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	flows(2)
	if r, o := tcpStats("clever"); r != 2 || o != 2 {
		t.Fatalf("after the reload: %d reasons, %d originals", r, o)
	}
	if r, _ := tcpStats("smart"); r != -1 {
		t.Fatal("the renamed group's counters are still served")
	}
}

// A Score pick whose node cannot be reached is retried once on the other
// node within the flow's deadline: no flow fails, and the dead node is
// counted against (the group leaves it at once after its failure).
func TestAScorePickThatFailsToConnectIsRetriedOnAnotherNode(t *testing.T) {
	dead, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := dead.Addr().String()
	dead.Close()
	text := `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
[[outbounds]]
tag = "gone"
type = "socks"
server = "` + addr + `"
[[outbounds]]
tag = "d1"
type = "direct"
[[groups]]
tag = "smart"
policy = "score"
members = ["gone", "d1"]
[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"
[route]
final = "smart"
`
	s, _, err := config.Parse([]byte(text), "t.toml")
	if err != nil {
		t.Fatal(err)
	}
	sv, proxy := run(t, s, Options{})
	dst := tcpEcho(t)
	for i := range 6 {
		c, err := socksclient.Dial(proxy, dst, "", "")
		if err != nil {
			t.Fatalf("flow %d: %v", i, err)
		}
		if err := echoOnce(c, "hi"); err != nil {
			t.Fatalf("flow %d: %v", i, err)
		}
		c.Close()
	}
	var st *score.GroupStats
	for _, g := range sv.ScoreStats().Groups {
		if g.Group == "smart" && g.Network == "tcp" {
			st = &g.GroupStats
		}
	}
	if st == nil || st.Budget.Originals != 6 {
		t.Fatalf("stats %+v: want six originals (the retries earn none)", st)
	}
	if c := sv.ScoreStats().Cache; c.ExactCells == 0 || c.AggregateCells == 0 {
		t.Fatalf("cache %+v: the flows' reports never reached the engine", c)
	}
}
