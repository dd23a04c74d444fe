package health_test

import (
	"context"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// Six states per node: a failure in one (domain, family) leaves the five
// others alone.
func TestSixIndependentStates(t *testing.T) {
	for _, d := range health.Domains {
		for _, f := range health.Families {
			t.Run(d.String()+"/"+f.String(), func(t *testing.T) {
				h := newHarness(t, nil)
				h.register(1)
				h.pastGrace()
				for range 50 {
					h.e.ReportTraffic(id(1), d, f, false)
				}
				for _, d2 := range health.Domains {
					for _, f2 := range health.Families {
						want := d2 != d || f2 != f
						if got := h.alive(1, d2, f2); got != want {
							t.Errorf("after %s/%s died: %s/%s alive=%v, want %v", d, f, d2, f2, got, want)
						}
					}
				}
			})
		}
	}
}

// Probe thresholds: 3 consecutive probe failures in every domain.
func TestProbeFailureThresholds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fail  func(p *healthtest.Prober)
		doms  []health.Domain
		other health.Domain
	}{
		{"tcp", func(p *healthtest.Prober) { p.SetTCP(healthtest.Fail()) }, []health.Domain{health.TCP}, health.DNSUDP},
		{"udp", func(p *healthtest.Prober) { p.SetUDP(healthtest.Fail()) }, []health.Domain{health.DNSUDP, health.DataUDP}, health.TCP},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.register(1)
			tc.fail(h.p(1))
			for i := 1; i <= health.ProbeFailures; i++ {
				h.probe(1)
				for _, d := range tc.doms {
					if got, want := h.alive(1, d, v4), i < health.ProbeFailures; got != want {
						t.Fatalf("after %d failures %s alive=%v, want %v", i, d, got, want)
					}
				}
			}
			if !h.alive(1, tc.other, v4) {
				t.Errorf("%s died with the probed path", tc.other)
			}
			if got := h.deathsSeen(); len(got) != len(tc.doms) {
				t.Errorf("OnDeath calls %v, want one per dead state (%d)", got, len(tc.doms))
			}
		})
	}
}

// Real-traffic thresholds 10/3/50, a success resets the count, and probe
// failures count separately.
func TestTrafficFailureThresholds(t *testing.T) {
	for _, tc := range []struct {
		d    health.Domain
		want int
	}{
		{health.TCP, 10}, {health.DNSUDP, 3}, {health.DataUDP, 50},
	} {
		t.Run(tc.d.String(), func(t *testing.T) {
			h := newHarness(t, nil)
			h.register(1)
			h.pastGrace()
			// A success in the middle resets the count.
			for range tc.want - 1 {
				h.e.ReportTraffic(id(1), tc.d, v4, false)
			}
			h.e.ReportTraffic(id(1), tc.d, v4, true)
			// Probe failures up to one short of their own threshold do
			// not add up with traffic failures. (A UDP probe fails both
			// UDP domains, which would make the sibling explicitly alive
			// and skip the death: TCP shows the separation.)
			probeFails := 0
			if tc.d == health.TCP {
				h.p(1).SetTCP(healthtest.Fail())
				for range health.ProbeFailures - 1 {
					h.probe(1)
				}
				probeFails = health.ProbeFailures - 1
			}
			for i := 1; i <= tc.want; i++ {
				h.e.ReportTraffic(id(1), tc.d, v4, false)
				if got, want := h.alive(1, tc.d, v4), i < tc.want; got != want {
					t.Fatalf("after %d traffic failures alive=%v, want %v", i, got, want)
				}
			}
			if s := h.state(1).Of(tc.d, v4); s.ProbeFailures != probeFails || s.TrafficFailures != tc.want {
				t.Errorf("counters probe=%d traffic=%d, want %d and %d", s.ProbeFailures, s.TrafficFailures, probeFails, tc.want)
			}
			h.wantLog("node n1 " + tc.d.String() + "/V4 dead after " + itoa(tc.want) + " real-traffic failures")
		})
	}
}

// Cooldown after the n-th consecutive probe failure: 5 s doubling to 300 s.
func TestCooldownSequence(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	h.p(1).SetTCP(healthtest.Fail())
	want := []time.Duration{5, 10, 20, 40, 80, 160, 300, 300, 300, 300}
	for i, w := range want {
		h.probe(1)
		s := h.state(1).Of(health.TCP, v4)
		if got := s.CooldownUntil.Sub(h.clk.Now()); got != w*time.Second {
			t.Errorf("failure %d: cooldown %v, want %v", i+1, got, w*time.Second)
		}
		if got := health.CooldownAfter(i + 1); got != w*time.Second {
			t.Errorf("cooldownAfter(%d) = %v", i+1, got)
		}
	}
	if got := health.CooldownAfter(1 << 20); got != health.CooldownMax {
		t.Errorf("deep cooldown %v", got)
	}
}

// A dead state needs two consecutive probe successes; a failure between
// them starts over.
func TestRecoveryNeedsTwoSuccesses(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	p := h.p(1)
	p.QueueTCP(healthtest.Fail(), healthtest.Fail(), healthtest.Fail(),
		healthtest.OK(time.Millisecond), healthtest.Fail(), healthtest.OK(time.Millisecond))
	for range 3 {
		h.probe(1)
	}
	if h.alive(1, health.TCP, v4) {
		t.Fatal("alive after 3 failures")
	}
	for i, want := range []bool{false, false, false, true} {
		h.probe(1)
		if got := h.alive(1, health.TCP, v4); got != want {
			t.Fatalf("probe %d after death: alive=%v, want %v", i+1, got, want)
		}
		if i == 0 {
			s := h.state(1).Of(health.TCP, v4)
			if s.RecoverySuccesses != 1 || s.CooldownUntil.After(h.clk.Now()) {
				t.Errorf("after one success: successes %d, cooldown %v (due now expected)", s.RecoverySuccesses, s.CooldownUntil)
			}
		}
	}
	h.wantLog("node n1 tcp/V4 dead after 3 probe failures")
	h.wantLog("node n1 tcp/V4 alive again")
	if got := h.changesSeen(); got != 2 {
		t.Errorf("OnChange calls %d, want 2 (death, recovery)", got)
	}
	if got := h.deathsSeen(); len(got) != 1 || got[0] != "n1" {
		t.Errorf("OnDeath %v, want [n1]", got)
	}
}

// After a network change one fresh success revives a dead state; stale
// cooldowns are cleared.
func TestNetworkChangeOneSuccessRecovers(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	h.p(1).SetTCP(healthtest.Fail())
	for range 6 {
		h.probe(1)
	}
	h.e.NotifyNetworkChange()
	s := h.state(1).Of(health.TCP, v4)
	if !s.CooldownUntil.IsZero() || !s.Primed || s.ProbeFailures != 0 {
		t.Fatalf("after the change: cooldown %v primed %v failures %d", s.CooldownUntil, s.Primed, s.ProbeFailures)
	}
	h.p(1).SetTCP(healthtest.OK(time.Millisecond))
	h.probe(1)
	if !h.alive(1, health.TCP, v4) {
		t.Fatal("one success after a network change did not revive the state")
	}
	h.wantLog("network changed")
}

// A network change primes, but a failure after it falls back to two.
func TestNetworkChangeFailureUnprimes(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	h.p(1).QueueTCP(healthtest.Fail(), healthtest.Fail(), healthtest.Fail(), healthtest.Fail(), healthtest.OK(time.Millisecond))
	for range 3 {
		h.probe(1)
	}
	h.e.NotifyNetworkChange()
	h.probe(1) // fails
	h.probe(1) // one success
	if h.alive(1, health.TCP, v4) {
		t.Fatal("revived by one success though the probe after the change failed")
	}
	h.probe(1)
	if !h.alive(1, health.TCP, v4) {
		t.Fatal("two successes did not revive")
	}
}

// The 60 s grace: non-forced failures are recorded, not counted; forced
// ones count; a new incarnation starts over, the same one is kept.
func TestGrace(t *testing.T) {
	h := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = nil })
	h.register(1)
	h.p(1).SetTCP(healthtest.Fail())
	h.start()
	for range 20 {
		h.e.ReportTraffic(id(1), health.DNSUDP, v4, false)
	}
	if !h.alive(1, health.DNSUDP, v4) {
		t.Fatal("traffic failures in the grace killed the state")
	}
	h.step(59*time.Second, time.Second) // cycles at 0 and 30 s: both in the grace
	s := h.state(1).Of(health.TCP, v4)
	if !h.alive(1, health.TCP, v4) || s.ProbeFailures != 0 || len(s.History) != 2 || !s.Observed {
		t.Fatalf("in the grace: alive %v failures %d history %d observed %v", h.alive(1, health.TCP, v4), s.ProbeFailures, len(s.History), s.Observed)
	}
	h.wantLog("within the 1m0s grace (not counted)")
	// A forced probe counts even in the grace.
	h.probe(1)
	if got := h.state(1).Of(health.TCP, v4).ProbeFailures; got != 1 {
		t.Errorf("forced failure in the grace counted %d, want 1", got)
	}
	h.step(2*time.Second, time.Second) // past the grace
	for range 3 {
		h.e.ReportTraffic(id(1), health.DNSUDP, v4, false)
	}
	if h.alive(1, health.DNSUDP, v4) {
		t.Error("traffic failures after the grace did not count")
	}

	// Same incarnation: kept. New incarnation: fresh, grace again.
	h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: h.p(1), Incarnation: 1}})
	if h.alive(1, health.DNSUDP, v4) {
		t.Error("a kept node lost its state")
	}
	h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: h.p(1), Incarnation: 2}})
	st := h.state(1)
	if !h.alive(1, health.DNSUDP, v4) || st.Of(health.DNSUDP, v4).Observed || !st.GraceUntil.Equal(h.clk.Now().Add(health.Grace)) {
		t.Errorf("a new incarnation kept its state: %+v", st.Of(health.DNSUDP, v4))
	}
	for range 5 {
		h.e.ReportTraffic(id(1), health.DNSUDP, v4, false)
	}
	if !h.alive(1, health.DNSUDP, v4) {
		t.Error("the new incarnation has no grace")
	}
	// Dropped: no longer known.
	h.e.Sync(nil)
	if h.e.Alive(id(1), health.TCP, v4) {
		t.Error("a dropped node reads alive")
	}
	if _, ok := h.e.State(id(1)); ok {
		t.Error("a dropped node keeps its state")
	}
}

// History: 100 entries per node, domain and family, with clock times; the
// synthetic placeholder is flagged and left out of display, the average and
// LastReal.
func TestHistory(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	p := h.p(1)
	for i := range 150 {
		p.QueueTCP(healthtest.OK(time.Duration(i+1) * time.Millisecond))
		h.probe(1)
		h.clk.Advance(time.Second)
	}
	s := h.state(1).Of(health.TCP, v4)
	if len(s.History) != health.HistorySize {
		t.Fatalf("history holds %d, want %d", len(s.History), health.HistorySize)
	}
	first, last := s.History[0], s.History[len(s.History)-1]
	if first.Delay != 51*time.Millisecond || last.Delay != 150*time.Millisecond {
		t.Errorf("history spans %v..%v, want 51ms..150ms", first.Delay, last.Delay)
	}
	if want := healthtest.Epoch.Add(149 * time.Second); !last.Time.Equal(want) {
		t.Errorf("last entry at %v, want %v", last.Time, want)
	}
	avg, _ := h.e.Latency(id(1), health.TCP, v4)
	real, _ := h.e.LastReal(id(1))
	h.e.ReportDial(id(1), v4, 0, false, errDial)
	h.e.ReportDial(id(1), v4, 0, false, errDial)
	s = h.state(1).Of(health.TCP, v4)
	x := s.History[len(s.History)-1]
	if !x.Synthetic || x.Delay != health.SyntheticDelay || len(s.History) != health.HistorySize {
		t.Fatalf("placeholder %+v (history %d)", x, len(s.History))
	}
	if d := s.Display(); len(d) != health.HistorySize-1 || d[len(d)-1].Synthetic {
		t.Errorf("display history %d entries, synthetic last %v", len(d), d[len(d)-1].Synthetic)
	}
	if got, _ := h.e.Latency(id(1), health.TCP, v4); got != avg {
		t.Errorf("placeholder moved the average %v -> %v", avg, got)
	}
	if got, _ := h.e.LastReal(id(1)); got != real || got.Synthetic {
		t.Errorf("LastReal %+v, want %+v", got, real)
	}
	// Other cells keep their own histories.
	if s := h.state(1).Of(health.TCP, v6); len(s.History) != 0 {
		t.Errorf("tcp/V6 history %d", len(s.History))
	}
}

// The halving moving average: first sample initializes, then halves.
func TestMovingAverage(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	if _, ok := h.e.Latency(id(1), health.TCP, v4); ok {
		t.Fatal("latency before any sample")
	}
	for _, tc := range []struct{ sample, want time.Duration }{
		{100, 100}, {200, 150}, {50, 100}, {300, 200},
	} {
		h.p(1).QueueTCP(healthtest.OK(tc.sample * time.Millisecond))
		h.probe(1)
		if got, ok := h.e.Latency(id(1), health.TCP, v4); !ok || got != tc.want*time.Millisecond {
			t.Errorf("after %dms: %v, want %dms", tc.sample, got, tc.want)
		}
	}
}

// The UDP probe: one DNS query to the first server; success records the
// RTT into both UDP domains; failure fails both; TCP is never touched;
// only UDP nodes are probed, and only with a DNS server configured.
func TestUDPProbe(t *testing.T) {
	second := netx.DomainAddr("dns.example", 53)
	h := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = []netx.Addr{dnsServer, second} })
	h.register(2)
	h.e.Sync([]health.Node{
		{ID: id(1), Name: "n1", Prober: h.p(1), UDP: true},
		{ID: id(2), Name: "n2", Prober: h.p(2), UDP: false},
	})
	h.p(1).SetUDP(healthtest.OKOn(7*time.Millisecond, v6))
	h.e.ProbeNow(context.Background())
	if got := h.p(1).LastUDP(); got != dnsServer {
		t.Errorf("queried %v, want the first server %v", got, dnsServer)
	}
	if _, udp := h.p(2).Calls(); udp != 0 {
		t.Errorf("a TCP-only node got %d UDP probes", udp)
	}
	for _, d := range []health.Domain{health.DNSUDP, health.DataUDP} {
		if got, ok := h.e.Latency(id(1), d, v6); !ok || got != 7*time.Millisecond {
			t.Errorf("%s/V6 latency %v %v", d, got, ok)
		}
		if !h.state(1).Of(d, v6).Observed {
			t.Errorf("%s/V6 not observed", d)
		}
	}
	if _, ok := h.e.Latency(id(1), health.TCP, v6); ok {
		t.Error("the UDP probe recorded a TCP latency")
	}
	h.p(1).SetUDP(healthtest.FailOn(v6))
	h.p(1).SetTCP(healthtest.OK(time.Millisecond))
	for range 3 {
		h.probe(1)
	}
	for _, d := range []health.Domain{health.DNSUDP, health.DataUDP} {
		if h.alive(1, d, v6) {
			t.Errorf("%s/V6 alive after 3 UDP failures", d)
		}
	}
	if !h.alive(1, health.TCP, v6) || !h.alive(1, health.TCP, v4) {
		t.Error("UDP failures changed TCP")
	}
	// Recovery: both revive together, after two successes.
	h.p(1).SetUDP(healthtest.OKOn(time.Millisecond, v6))
	h.probe(1)
	if h.alive(1, health.DataUDP, v6) {
		t.Error("revived after one success")
	}
	h.probe(1)
	if !h.alive(1, health.DataUDP, v6) || !h.alive(1, health.DNSUDP, v6) {
		t.Error("not revived after two successes")
	}

	// No DNS server: no UDP probe at all.
	h2 := newHarness(t, func(o *health.Options) { o.UDPCheckDNS = nil })
	h2.register(1)
	h2.probe(1)
	if _, udp := h2.p(1).Calls(); udp != 0 {
		t.Errorf("%d UDP probes with no DNS server configured", udp)
	}
}

// The TCP probe: the first check URL with the method, "" for a raw
// connect; success enters the family of its result; failure the family of
// its error, without latency or strikes.
func TestTCPProbe(t *testing.T) {
	h := newHarness(t, func(o *health.Options) {
		o.TCPCheckURLs = []string{"https://a.example/204", "https://b.example/"}
		o.TCPCheckMethod = "GET"
	})
	h.register(1)
	h.p(1).QueueTCP(healthtest.OKOn(20*time.Millisecond, v6))
	h.probe(1)
	if url, m := h.p(1).LastTCP(); url != "https://a.example/204" || m != "GET" {
		t.Errorf("probed %s %s", m, url)
	}
	if got, ok := h.e.Latency(id(1), health.TCP, v6); !ok || got != 20*time.Millisecond {
		t.Errorf("tcp/V6 latency %v %v", got, ok)
	}
	if _, ok := h.e.Latency(id(1), health.TCP, v4); ok {
		t.Error("a V6 success recorded a V4 latency")
	}
	h.p(1).SetTCP(healthtest.FailOn(v6))
	for range 3 {
		h.probe(1)
	}
	if h.alive(1, health.TCP, v6) == true || !h.alive(1, health.TCP, v4) {
		t.Errorf("after V6 failures: V6 alive %v, V4 alive %v", h.alive(1, health.TCP, v6), h.alive(1, health.TCP, v4))
	}
	if got, _ := h.e.Latency(id(1), health.TCP, v6); got != 20*time.Millisecond {
		t.Errorf("failures moved the latency to %v", got)
	}
	if h.e.Strikes(id(1)) != 0 {
		t.Error("probe failures made strikes")
	}
	// A failure naming no family is V4's.
	h.p(1).SetTCP(healthtest.Fail())
	h.probe(1)
	if got := h.state(1).Of(health.TCP, v4).ProbeFailures; got != 1 {
		t.Errorf("a familyless failure counted %d on V4", got)
	}

	raw := newHarness(t, nil)
	raw.register(1)
	raw.probe(1)
	if url, m := raw.p(1).LastTCP(); url != "" || m != "HEAD" {
		t.Errorf("with no URL probed %q %q, want a raw connect with HEAD default", m, url)
	}
}

// Skip-death: a UDP domain does not die while its sibling is explicitly
// alive; both die together when the same probe fails them.
func TestSkipUDPDeath(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	h.pastGrace()
	h.e.ReportTraffic(id(1), health.DataUDP, v4, true) // DataUdp explicitly alive
	for range 5 {
		h.e.ReportTraffic(id(1), health.DNSUDP, v4, false)
	}
	if !h.alive(1, health.DNSUDP, v4) {
		t.Fatal("DnsUdp died while DataUdp is explicitly alive")
	}
	if len(h.deathsSeen()) != 0 {
		t.Fatal("OnDeath called for a skipped death")
	}
	h.wantLog("stays alive after 3 real-traffic failures: data_udp/V4 is alive")
	// Without an observed sibling, DnsUdp dies.
	h.e.ReportTraffic(id(1), health.DNSUDP, v6, false)
	h.e.ReportTraffic(id(1), health.DNSUDP, v6, false)
	h.e.ReportTraffic(id(1), health.DNSUDP, v6, false)
	if h.alive(1, health.DNSUDP, v6) {
		t.Error("DnsUdp/V6 survived with no explicitly alive sibling")
	}
	// One probe failing both UDP domains kills both.
	h.p(1).SetUDP(healthtest.Fail())
	for range 3 {
		h.probe(1)
	}
	if h.alive(1, health.DNSUDP, v4) || h.alive(1, health.DataUDP, v4) {
		t.Error("a UDP probe failing both domains left one alive")
	}
	if got := h.deathsSeen(); len(got) != 3 {
		t.Errorf("OnDeath %v, want 3 (dns V6, then dns and data V4)", got)
	}
}

// Callbacks run without engine locks: they may read everything.
func TestCallbacksOutsideLocks(t *testing.T) {
	var h *harness
	calls := 0
	h = newHarness(t, func(o *health.Options) {
		o.OnDeath = func(id health.NodeID, name string) {
			calls++
			_, _ = h.e.State(id) // takes the node's lock
			h.e.Alive(id, health.TCP, v4)
			h.e.ReportTraffic(id, health.DataUDP, v4, true)
		}
		o.OnChange = func(id health.NodeID) {
			calls++
			_, _ = h.e.State(id)
		}
	})
	h.register(1)
	h.p(1).SetTCP(healthtest.Fail())
	for range 3 {
		h.probe(1)
	}
	if calls != 2 {
		t.Errorf("callbacks called %d times, want 2", calls)
	}
}

// UDP eligibility: DataUdp or DnsUdp alive; both explicitly dead excluded;
// no UDP state inherits TCP.
func TestUDPEligible(t *testing.T) {
	h := newHarness(t, nil)
	h.register(4)
	h.pastGrace()
	kill := func(i int, d health.Domain) {
		for range 50 {
			h.e.ReportTraffic(id(i), d, v4, false)
		}
	}
	// 1: no UDP state, TCP alive: eligible.
	// 2: no UDP state, TCP dead: inherits, not eligible.
	kill(2, health.TCP)
	// 3: both UDP domains dead (one probe), TCP alive: excluded.
	h.p(3).SetUDP(healthtest.Fail())
	for range 3 {
		h.probe(3)
	}
	// 4: DataUdp dead, DnsUdp never observed (alive): eligible.
	kill(4, health.DataUDP)
	if h.alive(4, health.DataUDP, v4) {
		t.Fatal("DataUdp of node 4 alive")
	}
	for _, tc := range []struct {
		i        int
		has, elg bool
	}{{1, false, true}, {2, false, false}, {3, true, false}, {4, true, true}} {
		if got := h.e.HasUDPState(id(tc.i), v4); got != tc.has {
			t.Errorf("node %d HasUDPState %v, want %v", tc.i, got, tc.has)
		}
		if got := h.e.UDPEligible(id(tc.i), v4); got != tc.elg {
			t.Errorf("node %d UDPEligible %v, want %v", tc.i, got, tc.elg)
		}
	}
	// Node 3 in V6 has no UDP state: inherits TCP/V6 (alive).
	if !h.e.UDPEligible(id(3), v6) {
		t.Error("a family without UDP state did not inherit TCP")
	}
}

// An unregistered ID reads as dead, ineligible, without latency or strikes.
func TestUnknownNode(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	x := id(99)
	if h.e.Alive(x, health.TCP, v4) || h.e.UDPEligible(x, v4) || h.e.HasUDPState(x, v4) || h.e.Strikes(x) != 0 {
		t.Error("an unknown node reads as usable")
	}
	if _, ok := h.e.Latency(x, health.TCP, v4); ok {
		t.Error("an unknown node has a latency")
	}
	h.e.ReportDial(x, v4, time.Second, false, errDial)
	h.e.ReportTraffic(x, health.TCP, v4, false)
	h.e.Restore(x, health.Sample{Time: h.clk.Now(), Delay: time.Second})
	if _, err := h.e.Delay(context.Background(), x, "", 0); err == nil {
		t.Error("Delay of an unknown node succeeded")
	}
}

// Restore: at most 24 h old, never liveness; LastReal is the last real
// TCP sample.
func TestRestoreAndLastReal(t *testing.T) {
	h := newHarness(t, nil)
	h.register(3)
	now := h.clk.Now()
	h.e.Restore(id(1), health.Sample{Time: now.Add(-23 * time.Hour), Delay: 80 * time.Millisecond, Family: v6})
	h.e.Restore(id(2), health.Sample{Time: now.Add(-25 * time.Hour), Delay: 80 * time.Millisecond})
	h.e.Restore(id(3), health.Sample{Time: now, Delay: 80 * time.Millisecond, Synthetic: true})
	if got, ok := h.e.Latency(id(1), health.TCP, v6); !ok || got != 80*time.Millisecond {
		t.Errorf("restored latency %v %v", got, ok)
	}
	if s := h.state(1).Of(health.TCP, v6); s.Observed || len(s.History) != 1 {
		t.Errorf("restore made the state observed (%v) or history %d", s.Observed, len(s.History))
	}
	if got, ok := h.e.LastReal(id(1)); !ok || got.Delay != 80*time.Millisecond || got.Family != v6 {
		t.Errorf("LastReal after restore %+v %v", got, ok)
	}
	for _, i := range []int{2, 3} {
		if _, ok := h.e.Latency(id(i), health.TCP, v4); ok {
			t.Errorf("node %d: a stale or synthetic sample was restored", i)
		}
	}
	// A dead node is restored no liveness (it has none to restore): a
	// probe success replaces LastReal.
	h.p(1).QueueTCP(healthtest.OK(30 * time.Millisecond))
	h.probe(1)
	if got, _ := h.e.LastReal(id(1)); got.Delay != 30*time.Millisecond || got.Family != v4 || !got.Time.Equal(now) {
		t.Errorf("LastReal %+v", got)
	}
}

// Epoch moves on every change a read could see, not on others.
func TestEpoch(t *testing.T) {
	h := newHarness(t, nil)
	h.register(1)
	h.e.ReportTraffic(id(1), health.TCP, v4, true) // observed now
	e0 := h.e.Epoch()
	h.e.ReportTraffic(id(1), health.TCP, v4, true) // nothing visible changes
	if h.e.Epoch() != e0 {
		t.Error("a success changing nothing moved the epoch")
	}
	h.probe(1) // latencies appear
	e1 := h.e.Epoch()
	if e1 == e0 {
		t.Error("a latency change did not move the epoch")
	}
	h.e.ReportDial(id(1), v4, 0, false, errDial)
	h.e.ReportDial(id(1), v4, 0, false, errDial) // a strike
	if h.e.Epoch() == e1 {
		t.Error("a strike did not move the epoch")
	}
	e2 := h.e.Epoch()
	h.register(2)
	if h.e.Epoch() == e2 {
		t.Error("Sync did not move the epoch")
	}
}
