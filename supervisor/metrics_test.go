package supervisor

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"switchyard/metrics"
	"switchyard/netx"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

// metricValue is the value of m's series name whose labels include labels
// (name=value pairs), and whether it exists.
func metricValue(t *testing.T, m *metrics.Metrics, name string, labels ...string) (float64, bool) {
	t.Helper()
	fs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if f.GetName() != name {
			continue
		}
	next:
		for _, s := range f.Metric {
			have := map[string]string{}
			for _, l := range s.Label {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue next
				}
			}
			return sampleValue(s), true
		}
	}
	return 0, false
}

func sampleValue(s *dto.Metric) float64 {
	switch {
	case s.Counter != nil:
		return s.Counter.GetValue()
	case s.Gauge != nil:
		return s.Gauge.GetValue()
	case s.Histogram != nil:
		return float64(s.Histogram.GetSampleCount())
	}
	return 0
}

func wantMetric(t *testing.T, m *metrics.Metrics, want float64, name string, labels ...string) {
	t.Helper()
	v, ok := metricValue(t, m, name, labels...)
	if !ok || v != want {
		t.Fatalf("%s%v = %v (present %v), want %v", name, labels, v, ok, want)
	}
}

// waitMetric polls until the series has the value want.
func waitMetric(t *testing.T, m *metrics.Metrics, want float64, name string, labels ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, ok := metricValue(t, m, name, labels...); ok && v == want {
			return
		}
		if time.Now().After(deadline) {
			wantMetric(t, m, want, name, labels...)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A real flow through a direct outbound, a selector switch, a dial that
// fails, health probes and reloads move the counters of the metrics the
// supervisor is given; a reload that removes an outbound deletes its
// series.
func TestSupervisorFeedsTheMetrics(t *testing.T) {
	s := selectorSpec()
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "dead", Type: "socks", Server: closedPort(t), AddressFamily: "auto"})
	s.Groups[0].Members = []string{"direct2", "direct", "dead"}
	s.Health.TCPCheckURLs = []string{checkServer(t)}
	m := metrics.New()
	sv, addr := run(t, s, Options{Metrics: m})

	// A flow through direct2 (the selector's first member).
	echo := tcpEcho(t)
	c, err := socksclient.Dial(addr, echo, "", "")
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("ping"))
	if _, err := io.ReadFull(c, make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	wantMetric(t, m, 1, "switchyard_flows_open", "network", "tcp", "inbound", "socks-in", "outbound", "direct2")
	c.Close()
	waitMetric(t, m, 0, "switchyard_flows_open", "network", "tcp", "inbound", "socks-in", "outbound", "direct2")
	wantMetric(t, m, 1, "switchyard_flows_total", "network", "tcp", "inbound", "socks-in", "outbound", "direct2")
	wantMetric(t, m, 4, "switchyard_outbound_bytes_total", "outbound", "direct2", "direction", "up")
	wantMetric(t, m, 4, "switchyard_outbound_bytes_total", "outbound", "direct2", "direction", "down")
	wantMetric(t, m, 1, "switchyard_dials_total", "network", "tcp", "outbound", "direct2", "result", "success")

	// A UDP association: its sub-link through direct2 is a UDP dial.
	uecho := udpEcho(t)
	link := sv.conn.OpenAssociation(netx.Flow{Inbound: "socks-in", Src: netip.MustParseAddrPort("127.0.0.1:5000")})
	link.WritePacket([]byte("ping"), netx.AddrFromAddrPort(uecho.LocalAddr().(*net.UDPAddr).AddrPort()))
	if _, _, err := link.ReadPacket(make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	wantMetric(t, m, 1, "switchyard_dials_total", "network", "udp", "outbound", "direct2", "result", "success")
	wantMetric(t, m, 1, "switchyard_flows_open", "network", "udp", "inbound", "socks-in", "outbound", "direct2")
	link.Close()
	waitMetric(t, m, 0, "switchyard_flows_open", "network", "udp", "inbound", "socks-in", "outbound", "direct2")

	// The selector moves to dead: a switch per network, then a dial that
	// fails connecting.
	if _, err := sv.SelectGroup("pick", "dead"); err != nil {
		t.Fatal(err)
	}
	wantMetric(t, m, 1, "switchyard_group_switches_total", "group", "pick", "network", "tcp", "reason", "manual")
	wantMetric(t, m, 1, "switchyard_group_switches_total", "group", "pick", "network", "udp", "reason", "manual")
	if c, err := socksclient.Dial(addr, echo, "", ""); err == nil {
		c.Close()
		t.Fatal("a flow through a closed port was opened")
	}
	wantMetric(t, m, 1, "switchyard_dials_total", "network", "tcp", "outbound", "dead", "result", "failure")
	wantMetric(t, m, 1, "switchyard_dial_failures_total", "network", "tcp", "outbound", "dead", "phase", "connect")

	// Probes: the direct nodes measure, dead's fail until it dies.
	for range 3 {
		sv.ProbeNow()
	}
	if v, ok := metricValue(t, m, "switchyard_health_probe_rtt_seconds", "node", "direct", "domain", "tcp", "family", "ipv4"); !ok || v < 3 {
		t.Fatalf("direct's probe RTT histogram holds %v samples, want at least 3", v)
	}
	// (Start ran a cycle of its own: at least the three forced ones.)
	if v, _ := metricValue(t, m, "switchyard_health_probe_failures_total", "node", "dead", "domain", "tcp"); v < 3 {
		t.Fatalf("%v probe failures of dead, want at least 3", v)
	}
	wantMetric(t, m, 1, "switchyard_health_transitions_total", "node", "dead", "domain", "tcp", "family", "ipv4", "from", "alive", "to", "dead")

	// A refused reload, then one that removes dead.
	bad := selectorSpec()
	bad.Route.Final = "nowhere"
	if err := sv.Apply(bad); err == nil {
		t.Fatal("a reload to an unknown final was applied")
	}
	wantMetric(t, m, 1, "switchyard_reloads_total", "outcome", "failure")
	wantMetric(t, m, 0, "switchyard_reloads_total", "outcome", "success")
	next := selectorSpec()
	next.Health.TCPCheckURLs = s.Health.TCPCheckURLs
	if err := sv.Apply(next); err != nil {
		t.Fatal(err)
	}
	wantMetric(t, m, 1, "switchyard_reloads_total", "outcome", "success")
	for _, series := range [][]string{
		{"switchyard_dials_total", "outbound", "dead"},
		{"switchyard_dial_failures_total", "outbound", "dead"},
		{"switchyard_health_transitions_total", "node", "dead"},
		{"switchyard_health_probe_failures_total", "node", "dead"},
	} {
		if _, ok := metricValue(t, m, series[0], series[1:]...); ok {
			t.Errorf("%v remains after the reload removed dead", series)
		}
	}
	// What stayed keeps its counts.
	wantMetric(t, m, 1, "switchyard_flows_total", "network", "tcp", "inbound", "socks-in", "outbound", "direct2")
	wantMetric(t, m, 1, "switchyard_dials_total", "network", "tcp", "outbound", "direct2", "result", "success")
	wantMetric(t, m, 1, "switchyard_dials_total", "network", "udp", "outbound", "direct2", "result", "success")
}

// Dials that wait for admission are counted with their wait.
func TestSupervisorCountsAdmissionWaits(t *testing.T) {
	srv := newSlowSocks(t, 30*time.Millisecond)
	s := baseSpec()
	s.Dial.MaxConcurrentDials = 1
	s.Outbounds = append(s.Outbounds, spec.Outbound{Tag: "up", Type: "socks", Server: srv.ln.Addr().String(), AddressFamily: "auto"})
	s.Route.Final = "up"
	m := metrics.New()
	sv, _ := run(t, s, Options{Gate: netx.NewGate(64), Metrics: m})
	flow := netx.Flow{Network: netx.TCP, Dst: netx.DomainAddr("dst.test", 80), Inbound: "socks-in"}
	var wg sync.WaitGroup
	conns := make([]net.Conn, 3)
	for i := range conns {
		wg.Go(func() {
			c, err := sv.conn.ConnectStream(context.Background(), flow)
			if err != nil {
				t.Error(err)
				return
			}
			conns[i] = c
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
	waits, _ := metricValue(t, m, "switchyard_admission_waits_total", "outcome", "admitted")
	if waits < 1 {
		t.Fatalf("%v admitted waits counted for 3 dials through 1 permit", waits)
	}
	wantMetric(t, m, waits, "switchyard_admission_wait_seconds")
	wantMetric(t, m, 3, "switchyard_dials_total", "network", "tcp", "outbound", "up", "result", "success")
	wantMetric(t, m, 1, "switchyard_admission_limit", "scope", "generation")
}
