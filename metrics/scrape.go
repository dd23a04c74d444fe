package metrics

import (
	"strconv"

	mdns "github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"switchyard/dns"
	"switchyard/outbound"
	"switchyard/warm"
)

// snapshots is the scrape-time collector: it reads the source's published
// counters (the tracker's totals under the table's brief lock, atomics
// everywhere else) and takes no lock a dial, a drain or a reload holds.
type snapshots struct{ m *Metrics }

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(namespace, "", name), help, labels, nil)
}

var (
	flowsOpenDesc = desc("flows_open",
		"Flows open now (TCP flows and UDP sub-links) by network, inbound and outbound tag.", "network", "inbound", "outbound")
	flowsTotalDesc = desc("flows_total",
		"Flows opened (TCP flows and UDP sub-links) by network, inbound and outbound tag, those that closed included.", "network", "inbound", "outbound")
	bytesDesc = desc("outbound_bytes_total",
		"Payload bytes through an outbound by direction: up (toward the destination), down (from it); flows that closed included.", "outbound", "direction")
	admissionLimitDesc = desc("admission_limit",
		"Dial admission permits: the generation in force's and the process gate's.", "scope")
	admissionInUseDesc = desc("admission_in_use",
		"Dial admission permits held now.", "scope")
	admissionWaitingDesc = desc("admission_waiting",
		"Dials waiting for a dial admission permit now.", "scope")
	dnsQueriesDesc = desc("dns_queries_total",
		"Questions asked of a resolver (since the [dns] table in force was applied).", "resolver")
	dnsHitsDesc = desc("dns_cache_hits_total",
		"Questions a resolver answered from its cache.", "resolver")
	dnsFailuresDesc = desc("dns_failures_total",
		"Questions a resolver got no usable answer for (an error, SERVFAIL, REFUSED).", "resolver")
	dnsLatencyDesc = desc("dns_exchange_duration_seconds",
		"Time of a resolver's exchanges with its servers, failed ones included.", "resolver")
	dnsServedDesc = desc("dns_service_queries_total",
		"Messages the in-process DNS service received.")
	dnsAnswersDesc = desc("dns_service_answers_total",
		"Replies of the in-process DNS service by response code.", "rcode")
	warmPooledDesc = desc("warm_pooled_connections",
		"Bare server connections (connected, TLS completed) waiting in a node's pool.", "node")
	warmBoundDesc = desc("warm_idle_bound_seconds",
		"The age past which a node's pooled connection is not handed out, learned per server (starting at 3 s).", "node")
	warmUpDesc = desc("warm_session_up",
		"Whether the session a node's flows share (QUIC connection, WireGuard tunnel, gRPC HTTP/2 connection) is up: 1 or 0.", "node")
	warmOwnedDesc = desc("warm_owned",
		"Whether an owner of the warm-up retains the node's reusable state: 1 or 0, by owner (selector, udp).", "node", "owner")
)

// WarmSource is implemented by a source that runs the warm-up: its nodes'
// published warm states.
type WarmSource interface {
	Warm() []warm.State
}

var allDescs = []*prometheus.Desc{
	flowsOpenDesc, flowsTotalDesc, bytesDesc,
	admissionLimitDesc, admissionInUseDesc, admissionWaitingDesc,
	dnsQueriesDesc, dnsHitsDesc, dnsFailuresDesc, dnsLatencyDesc, dnsServedDesc, dnsAnswersDesc,
	warmPooledDesc, warmBoundDesc, warmUpDesc, warmOwnedDesc,
	scoreReasonsDesc, scoreSwitchesDesc, scoreCandidatesDesc, scoreTrialsDesc,
	scoreOriginalsDesc, scoreCreditDesc, scorePoolDesc, scoreCellsDesc, scoreComparisonBytesDesc,
}

// dnsBounds are dns.LatencyBounds in seconds, the histogram's buckets.
var dnsBounds = func() []float64 {
	b := make([]float64, len(dns.LatencyBounds))
	for i, d := range dns.LatencyBounds {
		b[i] = d.Seconds()
	}
	return b
}()

func (s *snapshots) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs {
		ch <- d
	}
}

func (s *snapshots) Collect(ch chan<- prometheus.Metric) {
	ref := s.m.source.Load()
	if ref == nil {
		return
	}
	k := s.m.known.Load()
	s.flows(ch, ref.Source, k)
	gen, proc := ref.Admission()
	for _, a := range []struct {
		scope string
		limit int
		inUse int
		wait  int64
	}{{"generation", gen.Limit, gen.InUse, gen.Waiting}, {"process", proc.Limit, proc.InUse, proc.Waiting}} {
		ch <- prometheus.MustNewConstMetric(admissionLimitDesc, prometheus.GaugeValue, float64(a.limit), a.scope)
		ch <- prometheus.MustNewConstMetric(admissionInUseDesc, prometheus.GaugeValue, float64(a.inUse), a.scope)
		ch <- prometheus.MustNewConstMetric(admissionWaitingDesc, prometheus.GaugeValue, float64(a.wait), a.scope)
	}
	s.dns(ch, ref.Source)
	s.warm(ch, ref.Source, k)
	s.score(ch, ref.Source, k)
}

// warm emits the warm state of every node in force that keeps something
// warm: a pool's waiting connections and idle bound, a session's, and its
// owner bits.
func (s *snapshots) warm(ch chan<- prometheus.Metric, src Source, k *known) {
	ws, ok := src.(WarmSource)
	if !ok {
		return
	}
	for _, st := range ws.Warm() {
		if k.outbounds[st.Name] == nil {
			continue
		}
		switch st.Kind {
		case outbound.WarmPool:
			ch <- prometheus.MustNewConstMetric(warmPooledDesc, prometheus.GaugeValue, float64(st.Pooled), st.Name)
			ch <- prometheus.MustNewConstMetric(warmBoundDesc, prometheus.GaugeValue, st.IdleBound.Seconds(), st.Name)
		case outbound.WarmSession:
			ch <- prometheus.MustNewConstMetric(warmUpDesc, prometheus.GaugeValue, b2f(st.Up), st.Name)
		}
		for _, o := range warm.Owners {
			ch <- prometheus.MustNewConstMetric(warmOwnedDesc, prometheus.GaugeValue, b2f(st.Owners&o.Bit != 0), st.Name, o.Name)
		}
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// flows emits the flow and byte totals of the inbounds and outbounds in
// force.
func (s *snapshots) flows(ch chan<- prometheus.Metric, src Source, k *known) {
	t := src.Tracker()
	if t == nil {
		return
	}
	type updown struct{ up, down int64 }
	bytes := make(map[string]updown, len(k.outbounds))
	for _, tot := range t.Totals() {
		if k.outbounds[tot.Outbound] == nil || !k.inbounds[tot.Inbound] {
			continue
		}
		n := tot.Network.String()
		ch <- prometheus.MustNewConstMetric(flowsOpenDesc, prometheus.GaugeValue, float64(tot.Open), n, tot.Inbound, tot.Outbound)
		ch <- prometheus.MustNewConstMetric(flowsTotalDesc, prometheus.CounterValue, float64(tot.Flows), n, tot.Inbound, tot.Outbound)
		b := bytes[tot.Outbound]
		b.up += tot.Up
		b.down += tot.Down
		bytes[tot.Outbound] = b
	}
	for tag, b := range bytes {
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(b.up), tag, "up")
		ch <- prometheus.MustNewConstMetric(bytesDesc, prometheus.CounterValue, float64(b.down), tag, "down")
	}
}

// dns emits the counters of the DNS runtime in force, when there is one.
func (s *snapshots) dns(ch chan<- prometheus.Metric, src Source) {
	resolvers, svc, ok := src.DNSStats()
	if !ok {
		return
	}
	seen := make(map[string]bool, len(resolvers))
	for _, r := range resolvers {
		if seen[r.Name] {
			continue // one series per name
		}
		seen[r.Name] = true
		ch <- prometheus.MustNewConstMetric(dnsQueriesDesc, prometheus.CounterValue, float64(r.Queries), r.Name)
		ch <- prometheus.MustNewConstMetric(dnsHitsDesc, prometheus.CounterValue, float64(r.CacheHits), r.Name)
		ch <- prometheus.MustNewConstMetric(dnsFailuresDesc, prometheus.CounterValue, float64(r.Failures), r.Name)
		buckets := make(map[float64]uint64, len(dnsBounds))
		var cum uint64
		for i, b := range dnsBounds {
			cum += r.Latency[i]
			buckets[b] = cum
		}
		cum += r.Latency[len(dnsBounds)]
		ch <- prometheus.MustNewConstHistogram(dnsLatencyDesc, cum, r.LatencySum.Seconds(), buckets, r.Name)
	}
	ch <- prometheus.MustNewConstMetric(dnsServedDesc, prometheus.CounterValue, float64(svc.Queries))
	for code, n := range svc.Rcodes {
		if n > 0 {
			ch <- prometheus.MustNewConstMetric(dnsAnswersDesc, prometheus.CounterValue, float64(n), rcodeName(code))
		}
	}
	if svc.OtherRcodes > 0 {
		ch <- prometheus.MustNewConstMetric(dnsAnswersDesc, prometheus.CounterValue, float64(svc.OtherRcodes), "other")
	}
}

func rcodeName(code int) string {
	if s, ok := mdns.RcodeToString[code]; ok {
		return s
	}
	return strconv.Itoa(code)
}
