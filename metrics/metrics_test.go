package metrics_test

import (
	"errors"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"switchyard/dns"
	"switchyard/dns/serve"
	"switchyard/group"
	"switchyard/health"
	"switchyard/metrics"
	"switchyard/netx"
	"switchyard/track"
)

// fakeSource is a tracker with real flows, fixed admission counts and
// fixed DNS counters.
type fakeSource struct {
	t *track.Tracker
}

func (f fakeSource) Tracker() *track.Tracker { return f.t }
func (f fakeSource) Admission() (netx.Stats, netx.Stats) {
	return netx.Stats{Limit: 64, InUse: 2, Waiting: 1}, netx.Stats{Limit: 1024, InUse: 3}
}
func (f fakeSource) DNSStats() ([]dns.Stats, serve.Stats, bool) {
	s := dns.Stats{Name: "servers", Queries: 10, CacheHits: 4, Failures: 1, Exchanges: 6, LatencySum: 60 * time.Millisecond}
	s.Latency[2] = 6 // 5ms < d <= 10ms
	var svc serve.Stats
	svc.Queries, svc.Rcodes[0], svc.Rcodes[3] = 9, 8, 1
	return []dns.Stats{s}, svc, true
}

// pipeConn is one end of an in-memory pipe whose other end is drained.
func pipeConn(t *testing.T) net.Conn {
	a, b := net.Pipe()
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}

// families gathers m's registry by family name.
func families(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	fs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*dto.MetricFamily, len(fs))
	for _, f := range fs {
		out[f.GetName()] = f
	}
	return out
}

// value is the value of the series of family name whose labels include
// want (name=value pairs); ok is false when there is none.
func value(fs map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := fs[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if have[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

func mustValue(t *testing.T, fs map[string]*dto.MetricFamily, want float64, name string, labels ...string) {
	t.Helper()
	v, ok := value(fs, name, labels...)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	if v != want {
		t.Fatalf("%s%v = %v, want %v", name, labels, v, want)
	}
}

func TestHooksAndSnapshotsAreExposed(t *testing.T) {
	m := metrics.New()
	tr := track.New()
	m.Attach(fakeSource{tr})
	m.Sync(metrics.Config{Inbounds: []string{"socks-in"}, Outbounds: []string{"hk", "direct"}, Groups: []string{"auto"}})

	c := tr.Conn(track.Meta{Network: netx.TCP, Inbound: "socks-in", Outbound: "hk@v2"}, pipeConn(t))
	c.Write(make([]byte, 7))
	done := tr.Conn(track.Meta{Network: netx.TCP, Inbound: "socks-in", Outbound: "hk@v1"}, pipeConn(t))
	done.Write(make([]byte, 5))
	done.Close()
	m.Dialed(netx.TCP, "hk", metrics.DialSuccess, netx.PhaseHandshake)
	m.Dialed(netx.TCP, "hk", metrics.DialFailure, netx.PhaseTLS)
	m.Dialed(netx.TCP, "hk", metrics.DialFailure, netx.PhaseTLS)
	m.Dialed(netx.TCP, "gone", metrics.DialSuccess, netx.PhaseConnect) // not configured: dropped
	m.Dialed(netx.UDP, "hk", metrics.DialFailure, netx.PhaseHandshake)
	m.AdmissionWaited(20*time.Millisecond, true)
	m.Reloaded(true)
	m.Reloaded(false)
	m.Reloaded(false)
	m.Switched("auto", netx.TCP, group.SwitchLatency)
	m.Transition(health.NodeID{}, "hk", health.TCP, netx.V6, false)
	m.Probed(health.NodeID{}, "hk", health.TCP, netx.V4, 30*time.Millisecond, nil)
	m.Probed(health.NodeID{}, "hk", health.DNSUDP, netx.V4, 0, errors.New("timeout"))

	fs := families(t, m)
	mustValue(t, fs, 1, "switchyard_flows_open", "network", "tcp", "inbound", "socks-in", "outbound", "hk")
	mustValue(t, fs, 2, "switchyard_flows_total", "network", "tcp", "inbound", "socks-in", "outbound", "hk")
	mustValue(t, fs, 12, "switchyard_outbound_bytes_total", "outbound", "hk", "direction", "up")
	mustValue(t, fs, 0, "switchyard_outbound_bytes_total", "outbound", "hk", "direction", "down")
	mustValue(t, fs, 1, "switchyard_dials_total", "network", "tcp", "outbound", "hk", "result", "success")
	mustValue(t, fs, 2, "switchyard_dials_total", "network", "tcp", "outbound", "hk", "result", "failure")
	mustValue(t, fs, 1, "switchyard_dials_total", "network", "udp", "outbound", "hk", "result", "failure")
	mustValue(t, fs, 0, "switchyard_dials_total", "network", "udp", "outbound", "direct", "result", "success")
	mustValue(t, fs, 2, "switchyard_dial_failures_total", "network", "tcp", "outbound", "hk", "phase", "tls")
	mustValue(t, fs, 1, "switchyard_dial_failures_total", "network", "udp", "outbound", "hk", "phase", "handshake")
	if _, ok := value(fs, "switchyard_dials_total", "outbound", "gone"); ok {
		t.Fatal("a dial of an outbound not configured was counted")
	}
	mustValue(t, fs, 1, "switchyard_admission_waits_total", "outcome", "admitted")
	mustValue(t, fs, 0, "switchyard_admission_waits_total", "outcome", "abandoned")
	mustValue(t, fs, 1, "switchyard_admission_wait_seconds")
	mustValue(t, fs, 64, "switchyard_admission_limit", "scope", "generation")
	mustValue(t, fs, 3, "switchyard_admission_in_use", "scope", "process")
	mustValue(t, fs, 1, "switchyard_admission_waiting", "scope", "generation")
	mustValue(t, fs, 1, "switchyard_reloads_total", "outcome", "success")
	mustValue(t, fs, 2, "switchyard_reloads_total", "outcome", "failure")
	mustValue(t, fs, 1, "switchyard_group_switches_total", "group", "auto", "network", "tcp", "reason", "lower_latency")
	mustValue(t, fs, 1, "switchyard_health_transitions_total", "node", "hk", "domain", "tcp", "family", "ipv6", "from", "alive", "to", "dead")
	mustValue(t, fs, 1, "switchyard_health_probe_rtt_seconds", "node", "hk", "domain", "tcp", "family", "ipv4")
	mustValue(t, fs, 1, "switchyard_health_probe_failures_total", "node", "hk", "domain", "dns_udp")
	mustValue(t, fs, 10, "switchyard_dns_queries_total", "resolver", "servers")
	mustValue(t, fs, 4, "switchyard_dns_cache_hits_total", "resolver", "servers")
	mustValue(t, fs, 1, "switchyard_dns_failures_total", "resolver", "servers")
	mustValue(t, fs, 6, "switchyard_dns_exchange_duration_seconds", "resolver", "servers")
	mustValue(t, fs, 9, "switchyard_dns_service_queries_total")
	mustValue(t, fs, 1, "switchyard_dns_service_answers_total", "rcode", "NXDOMAIN")
	for _, name := range []string{"go_goroutines", "process_open_fds"} {
		if fs[name] == nil {
			t.Errorf("no %s: the Go and process collectors are not registered", name)
		}
	}
	h := fs["switchyard_dns_exchange_duration_seconds"].Metric[0].Histogram
	if h.GetSampleSum() != 0.06 || h.Bucket[1].GetCumulativeCount() != 0 || h.Bucket[2].GetCumulativeCount() != 6 {
		t.Fatalf("DNS latency histogram %v", h)
	}
	c.Close()
}

// A reload that removes an outbound and a group deletes their series
// (dials, node health, switches, flow totals); what stays keeps counting.
func TestSyncDeletesTheSeriesOfWhatAReloadRemoved(t *testing.T) {
	m := metrics.New()
	tr := track.New()
	m.Attach(fakeSource{tr})
	m.Sync(metrics.Config{Inbounds: []string{"in"}, Outbounds: []string{"hk", "sg"}, Groups: []string{"auto", "pick"}})
	tr.Conn(track.Meta{Network: netx.TCP, Inbound: "in", Outbound: "hk@v1"}, pipeConn(t)).Close()
	for _, tag := range []string{"hk", "sg"} {
		m.Dialed(netx.TCP, tag, metrics.DialFailure, netx.PhaseConnect)
		m.Probed(health.NodeID{}, tag, health.TCP, netx.V4, time.Millisecond, nil)
		m.Transition(health.NodeID{}, tag, health.TCP, netx.V4, false)
	}
	m.Switched("auto", netx.TCP, group.SwitchUnavailable)
	m.Switched("pick", netx.UDP, group.SwitchManual)

	m.Sync(metrics.Config{Inbounds: []string{"in"}, Outbounds: []string{"sg"}, Groups: []string{"pick"}})
	tr.Forget(func(_, tag string) bool { return tag == "sg" })
	m.Dialed(netx.TCP, "hk", metrics.DialSuccess, netx.PhaseConnect)
	m.Switched("auto", netx.TCP, group.SwitchManual)
	fs := families(t, m)
	for _, name := range []string{"switchyard_dials_total", "switchyard_dial_failures_total", "switchyard_flows_total", "switchyard_outbound_bytes_total"} {
		if _, ok := value(fs, name, "outbound", "hk"); ok {
			t.Errorf("%s still has hk", name)
		}
	}
	for _, name := range []string{"switchyard_health_probe_rtt_seconds", "switchyard_health_transitions_total"} {
		if _, ok := value(fs, name, "node", "hk"); ok {
			t.Errorf("%s still has hk", name)
		}
	}
	if _, ok := value(fs, "switchyard_group_switches_total", "group", "auto"); ok {
		t.Error("the removed group's switches remain")
	}
	mustValue(t, fs, 1, "switchyard_dial_failures_total", "outbound", "sg", "phase", "connect")
	mustValue(t, fs, 1, "switchyard_group_switches_total", "group", "pick", "network", "udp", "reason", "manual")
	m.Dialed(netx.TCP, "sg", metrics.DialFailure, netx.PhaseConnect)
	mustValue(t, families(t, m), 2, "switchyard_dial_failures_total", "outbound", "sg", "phase", "connect")
}

// The handler serves the text exposition.
func TestHandlerServesTheTextFormat(t *testing.T) {
	m := metrics.New()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), "# TYPE switchyard_reloads_total counter") {
		t.Fatalf("%d %s", rec.Code, rec.Body.String())
	}
}
