package health_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
)

const quicURL = "https://check.test:8443/generate_204"

// quicReport is one OnScoreQUIC call.
type quicReport struct {
	id      health.NodeID
	started time.Time
	rtt     time.Duration
	ok      bool
}

// quicHeard records OnScoreQUIC calls.
type quicHeard struct {
	mu   sync.Mutex
	seen []quicReport
}

func (q *quicHeard) hook(id health.NodeID, started time.Time, rtt time.Duration, ok bool) {
	q.mu.Lock()
	q.seen = append(q.seen, quicReport{id, started, rtt, ok})
	q.mu.Unlock()
}

func (q *quicHeard) reports() []quicReport {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]quicReport(nil), q.seen...)
}

// newQUICHarness is a harness whose first TCP check URL is url, hooked to
// heard and observed by rec, with nodes 1..n registered and Score leaves
// the nodes in leaves.
func newQUICHarness(t *testing.T, url string, n int, leaves ...int) (*harness, *quicHeard, *recorder) {
	t.Helper()
	heard, rec := &quicHeard{}, &recorder{}
	h := newHarness(t, func(o *health.Options) {
		if url != "" {
			o.TCPCheckURLs = []string{url}
		}
		o.OnScoreQUIC = heard.hook
		o.Observer = rec
	})
	h.register(n)
	ids := make([]health.NodeID, 0, len(leaves))
	for _, i := range leaves {
		ids = append(ids, id(i))
	}
	h.e.SetScoreLeaves(ids)
	return h, heard, rec
}

// Every periodic UDP cycle of a Score leaf performs the QUIC handshake
// toward the first TCP check URL; its duration reaches OnScoreQUIC and
// nothing else: not the DataUdp average or history, not the observer's
// probes, not the TCP state.
func TestScoreQUICEveryUDPCycle(t *testing.T) {
	const quicRTT = 77 * time.Millisecond
	h, heard, rec := newQUICHarness(t, quicURL, 2, 1)
	h.p(1).SetQUIC(healthtest.OK(quicRTT))
	h.start()
	h.step(60*time.Second, 5*time.Second) // cycles at 0, 30 and 60 s

	if _, udp := h.p(1).Calls(); udp != 3 {
		t.Fatalf("node 1: %d UDP probes, want 3", udp)
	}
	if n, url := h.p(1).QUICCalls(); n != 3 || url != quicURL {
		t.Fatalf("node 1: %d QUIC handshakes toward %q, want 3 toward %q", n, url, quicURL)
	}
	if n, _ := h.p(2).QUICCalls(); n != 0 {
		t.Fatalf("node 2 (not a Score leaf): %d QUIC handshakes", n)
	}
	got := heard.reports()
	if len(got) != 3 {
		t.Fatalf("OnScoreQUIC heard %d reports, want 3: %+v", len(got), got)
	}
	for _, r := range got {
		if r.id != id(1) || !r.ok || r.rtt != quicRTT {
			t.Fatalf("report %+v, want node 1 ok in %v", r, quicRTT)
		}
		if r.started.Before(healthtest.Epoch) || r.started.After(healthtest.Epoch.Add(60*time.Second)) {
			t.Fatalf("report started at %v, outside the cycles", r.started)
		}
	}
	s := h.state(1)
	for _, d := range []health.Domain{health.DNSUDP, health.DataUDP} {
		st := s.States[d][v4]
		if st.Latency != healthtest.DefaultRTT || len(st.History) != 3 {
			t.Errorf("%s: average %v over %d samples, want the DNS RTT %v over 3", d, st.Latency, len(st.History), healthtest.DefaultRTT)
		}
		for _, x := range st.History {
			if x.Delay == quicRTT {
				t.Errorf("%s history holds the QUIC handshake: %+v", d, st.History)
			}
		}
	}
	if lat, _ := h.e.Latency(id(1), health.DataUDP, v4); lat == quicRTT {
		t.Errorf("the DataUdp average is the QUIC handshake")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, r := range rec.rtts {
		if r == quicRTT {
			t.Errorf("the observer heard the QUIC handshake as a TCP probe")
		}
	}
	if tcp := s.States[health.TCP][v4]; len(tcp.History) != 3 || tcp.Latency != healthtest.DefaultRTT {
		t.Errorf("TCP state moved: %+v", tcp)
	}
}

// A DNS failure with a QUIC success in the same round fails DnsUdp only:
// DataUdp stays alive without a latency sample; both failing fail both;
// QUIC successes revive a dead DataUdp while DNS keeps failing.
func TestScoreQUICRescuesDataUDP(t *testing.T) {
	h, heard, _ := newQUICHarness(t, quicURL, 1, 1)
	h.pastGrace()
	p := h.p(1)
	p.SetUDP(healthtest.Fail())
	p.SetQUIC(healthtest.OK(20 * time.Millisecond))
	for range health.ProbeFailures {
		h.probe(1)
	}
	s := h.state(1)
	dns, data := s.States[health.DNSUDP][v4], s.States[health.DataUDP][v4]
	if dns.ProbeFailures != health.ProbeFailures || data.ProbeFailures != 0 {
		t.Fatalf("probe failures dns_udp %d data_udp %d, want %d and 0", dns.ProbeFailures, data.ProbeFailures, health.ProbeFailures)
	}
	if !data.Alive || !data.Observed || data.HasLatency || len(data.History) != 0 {
		t.Fatalf("data_udp %+v: want alive, observed, no sample", data)
	}
	// DnsUdp does not die while DataUdp is explicitly alive (a blocked :53).
	if !h.alive(1, health.DataUDP, v4) || !h.e.UDPEligible(id(1), v4) || len(h.deathsSeen()) != 0 {
		t.Fatalf("deaths %v; UDP eligible %v", h.deathsSeen(), h.e.UDPEligible(id(1), v4))
	}
	if s.States[health.TCP][v4].ProbeFailures != 0 {
		t.Fatalf("TCP failed: %+v", s.States[health.TCP][v4])
	}

	// Both failing: both count, and both die.
	p.SetQUIC(healthtest.Fail())
	for range health.ProbeFailures {
		h.probe(1)
	}
	s = h.state(1)
	if s.States[health.DataUDP][v4].ProbeFailures != health.ProbeFailures {
		t.Fatalf("data_udp probe failures %d", s.States[health.DataUDP][v4].ProbeFailures)
	}
	if h.alive(1, health.DNSUDP, v4) || h.alive(1, health.DataUDP, v4) || !h.alive(1, health.TCP, v4) {
		t.Fatalf("after both failed: dns_udp %v data_udp %v tcp %v", h.alive(1, health.DNSUDP, v4), h.alive(1, health.DataUDP, v4), h.alive(1, health.TCP, v4))
	}

	// DNS still failing, QUIC answering: DataUdp revives after two rounds.
	p.SetQUIC(healthtest.OK(20 * time.Millisecond))
	h.probe(1)
	if h.alive(1, health.DataUDP, v4) {
		t.Fatal("one QUIC success revived DataUdp")
	}
	h.probe(1)
	if !h.alive(1, health.DataUDP, v4) || h.alive(1, health.DNSUDP, v4) {
		t.Fatalf("after two QUIC successes: data_udp %v dns_udp %v", h.alive(1, health.DataUDP, v4), h.alive(1, health.DNSUDP, v4))
	}
	h.wantLog("data_udp/V4 alive again")
	if n := len(heard.reports()); n != 4*health.ProbeFailures-4 {
		t.Errorf("OnScoreQUIC heard %d reports, want %d", n, 4*health.ProbeFailures-4)
	}
}

// A QUIC success over the other family rescues that family's DataUdp, not
// the family the DNS failure names.
func TestScoreQUICFamily(t *testing.T) {
	h, _, _ := newQUICHarness(t, quicURL, 1, 1)
	h.pastGrace()
	h.p(1).SetUDP(healthtest.FailOn(v4))
	h.p(1).SetQUIC(healthtest.OKOn(time.Millisecond, v6))
	h.probe(1)
	s := h.state(1)
	if f := s.States[health.DataUDP][v4].ProbeFailures; f != 1 {
		t.Errorf("data_udp/IPv4 probe failures %d, want 1", f)
	}
	if st := s.States[health.DataUDP][v6]; !st.Observed || !st.Alive || st.HasLatency {
		t.Errorf("data_udp/IPv6 %+v: want observed alive without a sample", st)
	}
}

// No handshake for an http URL, without a URL, for a node that is not a
// Score leaf (or no longer is), or without UDP probing.
func TestScoreQUICAbsent(t *testing.T) {
	cases := []struct {
		name, url string
		leaves    []int
		setup     func(h *harness)
	}{
		{name: "http URL", url: "http://check.test/generate_204", leaves: []int{1}},
		{name: "no URL", leaves: []int{1}},
		{name: "not https", url: "ftp://check.test/x", leaves: []int{1}},
		{name: "not a Score leaf", url: quicURL},
		{name: "no longer a Score leaf", url: quicURL, leaves: []int{1}, setup: func(h *harness) { h.e.SetScoreLeaves(nil) }},
		{name: "a Score leaf without UDP", url: quicURL, leaves: []int{1}, setup: func(h *harness) {
			h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: h.p(1), Incarnation: 1}})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, heard, _ := newQUICHarness(t, c.url, 1, c.leaves...)
			if c.setup != nil {
				c.setup(h)
			}
			h.start()
			h.step(30*time.Second, 5*time.Second)
			if n, _ := h.p(1).QUICCalls(); n != 0 || len(heard.reports()) != 0 {
				t.Fatalf("%d handshakes, %d reports", n, len(heard.reports()))
			}
		})
	}
	// Without UDP check servers there is no UDP cycle, so no handshake.
	heard := &quicHeard{}
	h := newHarness(t, func(o *health.Options) {
		o.UDPCheckDNS = nil
		o.TCPCheckURLs = []string{quicURL}
		o.OnScoreQUIC = heard.hook
	})
	h.register(1)
	h.e.SetScoreLeaves([]health.NodeID{id(1)})
	h.probe(1)
	if n, _ := h.p(1).QUICCalls(); n != 0 {
		t.Fatalf("%d handshakes without UDP probing", n)
	}
}

// The handshake takes a probe token of its own: with a bound of 2, a
// blocked TCP probe and DNS query leave it waiting.
func TestScoreQUICCountedInConcurrency(t *testing.T) {
	g, heard := &healthtest.Gauge{}, &quicHeard{}
	h := newHarness(t, func(o *health.Options) {
		o.TCPCheckURLs = []string{quicURL}
		o.MaxConcurrentProbes = 2
		o.OnScoreQUIC = heard.hook
	})
	p := &healthtest.Prober{Gauge: g}
	h.e.Sync([]health.Node{{ID: id(1), Name: "n1", Prober: p, UDP: true, Incarnation: 1}})
	h.e.SetScoreLeaves([]health.NodeID{id(1)})
	p.Block()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.e.ProbeNow(context.Background(), id(1))
	}()
	waitFor(t, func() bool { return g.Current() == 2 })
	time.Sleep(50 * time.Millisecond)
	if n, _ := p.QUICCalls(); g.Current() != 2 || n != 0 {
		t.Fatalf("%d probes in flight, %d handshakes: the handshake did not wait for a token", g.Current(), n)
	}
	p.Unblock()
	<-done
	if n, _ := p.QUICCalls(); n != 1 || g.Peak() != 2 || len(heard.reports()) != 1 {
		t.Fatalf("%d handshakes, peak %d, %d reports", n, g.Peak(), len(heard.reports()))
	}
}

// The handshake ends at the probe's budget: a stalled one fails at
// CheckTimeout, is reported as not ok, and the round (the DNS query timed
// out too) is recorded then.
func TestScoreQUICBounded(t *testing.T) {
	h, heard, _ := newQUICHarness(t, quicURL, 1, 1)
	p := h.p(1)
	p.Block()
	h.e.Start()
	waitFor(t, func() bool {
		tcp, udp := p.Calls()
		n, _ := p.QUICCalls()
		return tcp == 1 && udp == 1 && n == 1
	})
	if len(heard.reports()) != 0 {
		t.Fatal("reported before the budget")
	}
	h.clk.Advance(health.DefaultCheckTimeout - time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if len(heard.reports()) != 0 || len(h.state(1).States[health.DNSUDP][v4].History) != 0 {
		t.Fatal("the round ended before its budget")
	}
	h.clk.Advance(time.Millisecond)
	health.Settle(h.e)
	got := heard.reports()
	if len(got) != 1 || got[0].ok || !got[0].started.Equal(healthtest.Epoch) {
		t.Fatalf("reports %+v, want one failure started at the epoch", got)
	}
	s := h.state(1)
	if dns, data := s.States[health.DNSUDP][v4], s.States[health.DataUDP][v4]; len(dns.History) != 1 || len(data.History) != 1 {
		t.Fatalf("round not recorded: dns_udp %+v data_udp %+v", dns, data)
	}
}
