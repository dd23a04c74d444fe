package supervisor

import (
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

// A UDP association through a URLTest group whose members health has not
// measured yet is answered although the group's first member is dead: its
// members' packet paths are prepared at once, the dead one counted as
// failed against its node, and the first that opens carries the flow.
func TestAColdURLTestAnswersAUDPFlowPastADeadFirstMember(t *testing.T) {
	sv1, b1 := run(t, baseSpec(), Options{})
	sv2, b2 := run(t, baseSpec(), Options{})
	s := baseSpec()
	s.Outbounds = append(s.Outbounds,
		spec.Outbound{Tag: "dead", Type: "socks", Server: closedPort(t), AddressFamily: "auto", UDP: true},
		spec.Outbound{Tag: "m1", Type: "socks", Server: b1, AddressFamily: "auto", UDP: true},
		spec.Outbound{Tag: "m2", Type: "socks", Server: b2, AddressFamily: "auto", UDP: true})
	s.Groups = []spec.Group{{Tag: "auto", Policy: "urltest", Members: []string{"dead", "m1", "m2"}}}
	s.Route.Final = "auto"
	// Nothing gets measured: the TCP probe's target refuses at once, there
	// is no UDP probe, and the next cycle is an hour away.
	s.Health = spec.Health{TCPCheckURLs: []string{"http://127.0.0.1:9/generate_204"}, CheckInterval: time.Hour, CheckTimeout: time.Second}
	clock := healthtest.NewClock(time.Now())
	sv, proxy := run(t, s, Options{clock: clock})
	// Past the registration grace, so a traffic failure counts.
	clock.Advance(health.Grace + time.Second)

	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	peer := udpEcho(t).LocalAddr().String()
	a.Send(peer, []byte("ping"))
	if _, got, ok := a.Recv(5 * time.Second); !ok || string(got) != "ping" {
		t.Fatalf("no answer through the group: %q", got)
	}
	if n := udpFlowsOf(sv1) + udpFlowsOf(sv2); n != 1 {
		t.Fatalf("%d flows on the live members, want 1", n)
	}
	failures := func(tag string) int {
		id, ok := sv.NodeID(tag)
		if !ok {
			t.Fatalf("no node %s", tag)
		}
		st, _ := sv.Health().State(id)
		return st.Of(health.DataUDP, netx.V4).TrafficFailures
	}
	if n := failures("dead"); n != 1 {
		t.Fatalf("dead: %d DataUdp traffic failures, want 1", n)
	}
	if n := failures("m1") + failures("m2"); n != 0 {
		t.Fatalf("the live members: %d DataUdp traffic failures", n)
	}
	// The association keeps the leaf that answered.
	a.Send(peer, []byte("again"))
	if _, got, ok := a.Recv(5 * time.Second); !ok || string(got) != "again" {
		t.Fatalf("no second answer: %q", got)
	}
	if n := failures("dead"); n != 1 {
		t.Fatalf("dead: %d DataUdp traffic failures after the second packet, want 1", n)
	}
}
