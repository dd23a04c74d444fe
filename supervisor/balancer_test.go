package supervisor

import (
	"bytes"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

// probeTasks counts the running balancer probe goroutines.
func probeTasks() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return bytes.Count(buf[:n], []byte("balancer.(*Balancer).probeLoop("))
}

func waitProbes(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for probeTasks() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%d probe tasks running, want %d", probeTasks(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pooled is a spec whose final route is a failover balancer over two socks
// outbounds pointing at two other supervisors.
func pooled(b1, b2 string) *spec.Spec {
	s := baseSpec()
	s.Outbounds = append(s.Outbounds,
		spec.Outbound{Tag: "m1", Type: "socks", Server: b1, AddressFamily: "auto", UDP: true},
		spec.Outbound{Tag: "m2", Type: "socks", Server: b2, AddressFamily: "auto", UDP: true})
	s.Balancers = []spec.Balancer{{Tag: "pool", Members: []string{"m1", "m2"}, Strategy: "failover", ProbeInterval: time.Hour, ProbeTimeout: time.Second}}
	s.Route.Final = "pool"
	return s
}

func udpFlowsOf(sv *Supervisor) int {
	n := 0
	for _, f := range sv.Tracker().Flows() {
		if f.Network == netx.UDP {
			n++
		}
	}
	return n
}

func TestAnAssociationMovesOffAMemberTheNextPacketAfterItGoesDown(t *testing.T) {
	sv1, b1 := run(t, baseSpec(), Options{})
	sv2, b2 := run(t, baseSpec(), Options{})
	sv, proxy := run(t, pooled(b1, b2), Options{})
	a, err := socksclient.Associate(proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	peer := udpEcho(t).LocalAddr().String()
	a.Send(peer, []byte("one"))
	if _, _, ok := a.Recv(2 * time.Second); !ok {
		t.Fatal("no reply through the first member")
	}
	if udpFlowsOf(sv1) != 1 || udpFlowsOf(sv2) != 0 {
		t.Fatalf("first packet: %d flows via m1, %d via m2", udpFlowsOf(sv1), udpFlowsOf(sv2))
	}
	sv.mu.Lock()
	sv.cur.balancers["pool"].bal.SetHealthy(0, false)
	sv.mu.Unlock()
	a.Send(peer, []byte("two"))
	if _, got, ok := a.Recv(2 * time.Second); !ok || string(got) != "two" {
		t.Fatalf("no reply through the second member: %q", got)
	}
	if udpFlowsOf(sv2) != 1 {
		t.Fatal("the packet after the member went down did not move to the other member")
	}
}

func TestProbesFollowTheirBalancer(t *testing.T) {
	_, b1 := run(t, baseSpec(), Options{})
	_, b2 := run(t, baseSpec(), Options{})
	base := probeTasks()
	sv, err := New(pooled(b1, b2), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if probeTasks() != base {
		t.Fatal("building started probes")
	}
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	waitProbes(t, base+2)
	// A member changes: the balancer is rebuilt and the old probes stop.
	s := pooled(b1, b2)
	s.Outbounds[3].AddressFamily = "ipv4_only"
	if err := sv.Apply(s); err != nil {
		t.Fatal(err)
	}
	waitProbes(t, base+2)
	// Unrelated change: the balancer and its probes are kept.
	s2 := pooled(b1, b2)
	s2.Outbounds[3].AddressFamily = "ipv4_only"
	s2.Outbounds[1].AddressFamily = "ipv6_only"
	old := sv.cur.balancers["pool"]
	if err := sv.Apply(s2); err != nil {
		t.Fatal(err)
	}
	if sv.cur.balancers["pool"] != old {
		t.Fatal("a balancer none of whose members changed was rebuilt")
	}
	waitProbes(t, base+2)
	// Removed: its probes stop.
	s3 := baseSpec()
	s3.Inbounds[0].Listen = netip.MustParseAddrPort("127.0.0.1:0")
	if err := sv.Apply(s3); err != nil {
		t.Fatal(err)
	}
	waitProbes(t, base)
	// Shutdown stops the rest.
	if err := sv.Apply(pooled(b1, b2)); err != nil {
		t.Fatal(err)
	}
	waitProbes(t, base+2)
	sv.Close()
	waitProbes(t, base)
}

func TestBalancerStatusReadsThePublishedBalancer(t *testing.T) {
	_, b1 := run(t, baseSpec(), Options{})
	_, b2 := run(t, baseSpec(), Options{})
	sv, _ := run(t, pooled(b1, b2), Options{})
	if st, ok := sv.BalancerStatus("pool"); !ok || st.Now != "m1" || len(st.Up) != 2 {
		t.Fatalf("published: %+v %v", st, ok)
	}
	sv.mu.Lock()
	sv.cur.balancers["pool"].bal.SetHealthy(0, false)
	sv.mu.Unlock()
	if st, _ := sv.BalancerStatus("pool"); st.Now != "m2" {
		t.Fatalf("m1 down: %+v", st)
	}
	if _, ok := sv.BalancerStatus("m1"); ok {
		t.Fatal("an outbound read as a balancer")
	}
	// A reload without the balancer unpublishes it.
	s := baseSpec()
	s.Inbounds[0].Listen = netip.MustParseAddrPort("127.0.0.1:0")
	if err := sv.Apply(s); err != nil {
		t.Fatal(err)
	}
	if _, ok := sv.BalancerStatus("pool"); ok {
		t.Fatal("a removed balancer still reads")
	}
}
