package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"switchyard/test/socksclient"
)

// scrape GETs /metrics with the bearer token and parses the exposition.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := apiCall(t, http.MethodGet, base+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	return fams
}

// sample is the value of the series of f whose labels include want.
func sample(f *dto.MetricFamily, want map[string]string) (float64, bool) {
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// The real binary serves GET /metrics behind its secret: after a SOCKS
// flow it shows the flow, its dial and its bytes (kept once it closed),
// the Go and process collectors, and SIGHUP reloads by outcome.
func TestMetricsAfterASocksFlow(t *testing.T) {
	apiPort := freeLoopbackPort(t)
	cfg := func(extra string) string {
		return fmt.Sprintf(`
[api]
listen = "127.0.0.1:%d"
secret = "s3cret"

[[inbounds]]
tag = "socks-in"
type = "socks"
listen = "127.0.0.1:0"
%s
[route]
final = "direct"
`, apiPort, extra)
	}
	p := start(t, cfg(""))
	base := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	p.waitLog("api listening", 1, 10*time.Second) // the API starts after the ready line

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without the secret: %d", resp.StatusCode)
	}

	c, err := socksclient.DialWithin(p.addr("socks-in"), echoServer(t), "", "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, base)
	flow := map[string]string{"network": "tcp", "inbound": "socks-in", "outbound": "direct"}
	if v, _ := sample(fams["switchyard_flows_open"], flow); v != 1 {
		t.Fatalf("flows open %v, want 1", v)
	}
	c.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = scrape(t, base)
		if v, ok := sample(fams["switchyard_flows_open"], flow); ok && v == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the flow is still open in /metrics")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, want := range []struct {
		name   string
		labels map[string]string
		value  float64
	}{
		{"switchyard_flows_total", flow, 1},
		{"switchyard_outbound_bytes_total", map[string]string{"outbound": "direct", "direction": "up"}, 5},
		{"switchyard_outbound_bytes_total", map[string]string{"outbound": "direct", "direction": "down"}, 5},
		{"switchyard_dials_total", map[string]string{"network": "tcp", "outbound": "direct", "result": "success"}, 1},
		{"switchyard_reloads_total", map[string]string{"outcome": "success"}, 0},
	} {
		if v, ok := sample(fams[want.name], want.labels); !ok || v != want.value {
			t.Errorf("%s%v = %v (present %v), want %v", want.name, want.labels, v, ok, want.value)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "switchyard_admission_limit"} {
		if fams[name] == nil {
			t.Errorf("no %s", name)
		}
	}

	// A broken file refused, then a good one applied.
	p.rewrite(cfg("\n[[outbounds]]\ntag = 7\n"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLog("reload refused", 1, 10*time.Second)
	p.rewrite(cfg("\n[[outbounds]]\ntag = \"d2\"\ntype = \"direct\"\n"))
	p.cmd.Process.Signal(syscall.SIGHUP)
	p.waitLog("reload applied", 1, 10*time.Second)
	fams = scrape(t, base)
	for outcome, want := range map[string]float64{"failure": 1, "success": 1} {
		if v, _ := sample(fams["switchyard_reloads_total"], map[string]string{"outcome": outcome}); v != want {
			t.Errorf("reloads %s = %v, want %v", outcome, v, want)
		}
	}
	if v, ok := sample(fams["switchyard_dials_total"], map[string]string{"network": "tcp", "outbound": "d2", "result": "success"}); !ok || v != 0 {
		t.Errorf("the outbound the reload added: dials %v (present %v), want 0", v, ok)
	}
}
