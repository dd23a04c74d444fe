package supervisor

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/config"
	"switchyard/health"
	"switchyard/netx"
	"switchyard/spec"
)

// A Score QUIC handshake reaches the Score engine as a UDP probe with the
// probe interval, success or failure.
func TestScoreQUICFeedsUDPProbes(t *testing.T) {
	f := &fakeFeed{}
	var n health.NodeID
	n[0] = 9
	hook := scoreQUICFeed(f, 20*time.Second)
	hook(n, time.Now(), 30*time.Millisecond, true)
	hook(n, time.Now(), 0, false)
	want := []feedEvent{
		{"probe", netx.UDP, n, 30 * time.Millisecond, true, 20 * time.Second},
		{"probe", netx.UDP, n, 0, false, 20 * time.Second},
	}
	if fmt.Sprint(f.events) != fmt.Sprint(want) {
		t.Fatalf("fed %v, want %v", f.events, want)
	}
	f.events = nil
	scoreQUICFeed(f, 0)(n, time.Now(), time.Millisecond, true)
	if len(f.events) != 1 || f.events[0].interval != health.DefaultCheckInterval {
		t.Fatalf("fed %v, want the default interval", f.events)
	}
}

// The health engine learns the Score leaves at start and at every reload:
// the members of Score groups, not those of other groups only.
func TestHealthLearnsTheScoreLeaves(t *testing.T) {
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
[[outbounds]]
tag = "d3"
type = "direct"
[[groups]]
tag = "smart"
policy = "score"
members = [MEMBERS]
[[groups]]
tag = "fast"
policy = "urltest"
members = ["d3"]
[health]
tcp_check_url = []
udp_check_dns = []
check_interval = "1h"
[route]
final = "smart"
`
	parse := func(members string) *spec.Spec {
		s, _, err := config.Parse([]byte(strings.ReplaceAll(text, "MEMBERS", members)), "t.toml")
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sv, _ := run(t, parse(`"d1", "d2"`), Options{})
	leaf := func(tag string) bool {
		id, ok := sv.NodeID(tag)
		if !ok {
			t.Fatalf("no node %s", tag)
		}
		return sv.Health().ScoreLeaf(id)
	}
	if !leaf("d1") || !leaf("d2") || leaf("d3") {
		t.Fatalf("Score leaves d1 %v d2 %v d3 %v, want d1 and d2", leaf("d1"), leaf("d2"), leaf("d3"))
	}
	if err := sv.Apply(parse(`"d2"`)); err != nil {
		t.Fatal(err)
	}
	if leaf("d1") || !leaf("d2") || leaf("d3") {
		t.Fatalf("after the reload: Score leaves d1 %v d2 %v d3 %v, want d2", leaf("d1"), leaf("d2"), leaf("d3"))
	}
}
