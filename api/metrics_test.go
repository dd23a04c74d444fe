package api

import (
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"switchyard/config"
	"switchyard/metrics"
	"switchyard/supervisor"
	"switchyard/test/socksclient"
)

// metricsConfig routes everything to the selector "pick" over a direct
// outbound and a SOCKS outbound whose server refuses; health probes WEB;
// DNS asks STUB.
const metricsConfig = `
[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"

[[outbounds]]
tag = "d1"
type = "direct"

[[outbounds]]
tag = "dead"
type = "socks"
server = "CLOSED"

[[groups]]
tag = "pick"
policy = "selector"
members = ["d1", "dead"]

[health]
tcp_check_url = ["WEB/generate_204"]
udp_check_dns = []
check_interval = "1h"
check_timeout = "2s"

[dns]
servers = ["udp://STUB"]

[route]
final = "pick"
`

// GET /metrics is behind the secret and exposes every switchyard family
// with its labels, moved by a real flow, a selector switch through the
// API, a failed dial, probes, a DNS query and a reload.
func TestMetricsEndpoint(t *testing.T) {
	stub, _ := dnsStub(t)
	closed := func() string {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(web.Close)
	text := strings.NewReplacer("WEB", web.URL, "STUB", stub, "CLOSED", closed).Replace(metricsConfig)
	s, _, err := config.Parse([]byte(text), "metrics.toml")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	sv, err := supervisor.New(s, supervisor.Options{Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := sv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sv.Close() })
	srv := New(sv, Options{Spec: s, Secret: "s3cret", Metrics: m.Handler()})
	if err := srv.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	r := &rig{sv: sv, srv: srv, spec: s, base: "http://" + srv.Addr().String()}

	for _, secret := range []string{"", "wrong"} {
		if code, body := r.do(t, "GET", "/metrics", secret, ""); code != http.StatusUnauthorized || !strings.Contains(string(body), `"message":"Unauthorized"`) {
			t.Fatalf("GET /metrics with secret %q: %d %s", secret, code, body)
		}
	}
	if code, _ := r.do(t, "GET", "/metrics?token=s3cret", "", ""); code != http.StatusUnauthorized {
		t.Fatalf("?token= on a plain GET /metrics: %d", code)
	}

	r.flow(t, echo(t)).Close()
	if code, body := r.do(t, "PUT", "/proxies/pick", "s3cret", `{"name":"dead"}`); code != http.StatusNoContent {
		t.Fatalf("PUT /proxies/pick: %d %s", code, body)
	}
	if c, err := socksclient.Dial(sv.Addr("socks-in").String(), echo(t), "", ""); err == nil {
		c.Close()
		t.Fatal("a flow through a refusing server opened")
	}
	for range 3 {
		sv.ProbeNow()
	}
	r.get(t, "/dns/query?name=example.test&type=A", 200, nil)
	if err := sv.Apply(s); err != nil {
		t.Fatal(err)
	}

	// The closed flow's bytes are counted when its relay ends, which the
	// client's Close does not wait for: scrape until they are there.
	var fams map[string]*dto.MetricFamily
	var body []byte
	for deadline := time.Now().Add(5 * time.Second); ; {
		var code int
		code, body = r.do(t, "GET", "/metrics", "s3cret", "")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", code, body)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		var err error
		fams, err = parser.TextToMetricFamilies(strings.NewReader(string(body)))
		if err != nil {
			t.Fatalf("the exposition does not parse: %v\n%s", err, body)
		}
		if got, _ := seriesValue(fams["switchyard_outbound_bytes_total"], map[string]string{"outbound": "d1", "direction": "down"}); got >= 4 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, want := range []struct {
		name   string
		typ    dto.MetricType
		labels []string
	}{
		{"switchyard_flows_open", dto.MetricType_GAUGE, []string{"network", "inbound", "outbound"}},
		{"switchyard_flows_total", dto.MetricType_COUNTER, []string{"network", "inbound", "outbound"}},
		{"switchyard_outbound_bytes_total", dto.MetricType_COUNTER, []string{"outbound", "direction"}},
		{"switchyard_dials_total", dto.MetricType_COUNTER, []string{"network", "outbound", "result"}},
		{"switchyard_dial_failures_total", dto.MetricType_COUNTER, []string{"network", "outbound", "phase"}},
		{"switchyard_admission_waits_total", dto.MetricType_COUNTER, []string{"outcome"}},
		{"switchyard_admission_wait_seconds", dto.MetricType_HISTOGRAM, nil},
		{"switchyard_admission_limit", dto.MetricType_GAUGE, []string{"scope"}},
		{"switchyard_admission_in_use", dto.MetricType_GAUGE, []string{"scope"}},
		{"switchyard_admission_waiting", dto.MetricType_GAUGE, []string{"scope"}},
		{"switchyard_health_transitions_total", dto.MetricType_COUNTER, []string{"node", "domain", "family", "from", "to"}},
		{"switchyard_health_probe_rtt_seconds", dto.MetricType_HISTOGRAM, []string{"node", "domain", "family"}},
		{"switchyard_health_probe_failures_total", dto.MetricType_COUNTER, []string{"node", "domain"}},
		{"switchyard_group_switches_total", dto.MetricType_COUNTER, []string{"group", "network", "reason"}},
		{"switchyard_dns_queries_total", dto.MetricType_COUNTER, []string{"resolver"}},
		{"switchyard_dns_cache_hits_total", dto.MetricType_COUNTER, []string{"resolver"}},
		{"switchyard_dns_failures_total", dto.MetricType_COUNTER, []string{"resolver"}},
		{"switchyard_dns_exchange_duration_seconds", dto.MetricType_HISTOGRAM, []string{"resolver"}},
		{"switchyard_dns_service_queries_total", dto.MetricType_COUNTER, nil},
		{"switchyard_reloads_total", dto.MetricType_COUNTER, []string{"outcome"}},
		{"go_goroutines", dto.MetricType_GAUGE, nil},
		{"process_cpu_seconds_total", dto.MetricType_COUNTER, nil},
	} {
		f := fams[want.name]
		if f == nil || len(f.Metric) == 0 {
			t.Errorf("no family %s", want.name)
			continue
		}
		if f.GetType() != want.typ {
			t.Errorf("%s is a %v, want a %v", want.name, f.GetType(), want.typ)
		}
		var got []string
		for _, l := range f.Metric[0].Label {
			got = append(got, l.GetName())
		}
		if !slices.Equal(sorted(got), sorted(want.labels)) {
			t.Errorf("%s labels %v, want %v", want.name, got, want.labels)
		}
	}
	for _, v := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"switchyard_flows_total", map[string]string{"network": "tcp", "inbound": "socks-in", "outbound": "d1"}, 1},
		{"switchyard_dials_total", map[string]string{"network": "tcp", "outbound": "d1", "result": "success"}, 1},
		{"switchyard_dials_total", map[string]string{"network": "tcp", "outbound": "dead", "result": "failure"}, 1},
		{"switchyard_dial_failures_total", map[string]string{"network": "tcp", "outbound": "dead", "phase": "connect"}, 1},
		{"switchyard_group_switches_total", map[string]string{"group": "pick", "network": "tcp", "reason": "manual"}, 1},
		{"switchyard_health_transitions_total", map[string]string{"node": "dead", "domain": "tcp", "family": "ipv4", "from": "alive", "to": "dead"}, 1},
		{"switchyard_dns_queries_total", map[string]string{"resolver": "servers"}, 1},
		{"switchyard_reloads_total", map[string]string{"outcome": "success"}, 1},
	} {
		if got, ok := seriesValue(fams[v.name], v.labels); !ok || got != v.want {
			t.Errorf("%s%v = %v (present %v), want %v", v.name, v.labels, got, ok, v.want)
		}
	}
	// Bytes of the closed flow stay counted: ping up, ping echoed down.
	if got, _ := seriesValue(fams["switchyard_outbound_bytes_total"], map[string]string{"outbound": "d1", "direction": "down"}); got < 4 {
		t.Errorf("d1 down bytes %v, want the 4 echoed", got)
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// seriesValue is the value of f's series with exactly labels.
func seriesValue(f *dto.MetricFamily, labels map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		if len(m.Label) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.Label {
			if labels[l.GetName()] != l.GetValue() {
				match = false
			}
		}
		if !match {
			continue
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
