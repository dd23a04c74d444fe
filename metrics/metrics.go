// Package metrics is switchyard's Prometheus exposition. It owns a
// registry of its own (never the global default) holding the Go and
// process collectors, the event counters the supervisor's hooks feed
// (dials, health transitions and probes, group switches, reloads,
// admission waits: hooks.go) and a collector that reads published
// snapshots at scrape time (flow and byte totals, admission counts, DNS
// counters: scrape.go).
//
// Series are bounded by the configuration: Sync is handed the inbounds,
// outbounds and groups in force after every apply; events about anything
// else are dropped and the series of what a reload removed are deleted.
// The per-flow hook (Dialed) uses label children resolved once per
// outbound and allocates nothing.
package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"switchyard/dns"
	"switchyard/dns/serve"
	"switchyard/netx"
	"switchyard/track"
)

const namespace = "switchyard"

// maxScrapes bounds the scrapes served at once; one beyond is answered 503.
const maxScrapes = 4

// Source is what the scrape-time collector reads: published snapshots
// and atomics only (a *supervisor.Supervisor satisfies it).
type Source interface {
	Tracker() *track.Tracker
	Admission() (generation, process netx.Stats)
	DNSStats() (resolvers []dns.Stats, service serve.Stats, ok bool)
}

// Metrics is the registry and everything registered in it. Its hooks may
// be called from any goroutine.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	dials          *prometheus.CounterVec   // network, outbound, result
	dialFailures   *prometheus.CounterVec   // network, outbound, phase
	transitions    *prometheus.CounterVec   // node, domain, family, from, to
	probeRTT       *prometheus.HistogramVec // node, domain, family
	probeFailures  *prometheus.CounterVec   // node, domain
	switches       *prometheus.CounterVec   // group, network, reason
	reloads        *prometheus.CounterVec   // outcome
	admissionWaits *prometheus.CounterVec   // outcome
	admissionWait  prometheus.Histogram
	admitted       [2]prometheus.Counter // admission_waits_total: abandoned, admitted

	known  atomic.Pointer[known]
	syncMu sync.Mutex // serializes Sync
	source atomic.Pointer[sourceRef]
}

type sourceRef struct{ Source }

// known is the configuration in force, as Sync was told of it, with each
// outbound's pre-resolved dial counters.
type known struct {
	outbounds map[string]*outboundCounters
	inbounds  map[string]bool
	groups    map[string]bool
}

// New returns the metrics with their registry. Nothing is read until a
// source is attached and Sync names the configuration.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.dials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "dials_total",
		Help: "Dials of an outbound (TCP flows; UDP sub-link opens) by result: success, failure, abandoned (the client left or a reload overtook the dial), blocked (a block outbound).",
	}, []string{"network", "outbound", "result"})
	m.dialFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "dial_failures_total",
		Help: "Failed dials of an outbound by network and the establishment phase that was running: routing, resolve, admission, connect, tls, transport, quic, tunnel, handshake.",
	}, []string{"network", "outbound", "phase"})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "health_transitions_total",
		Help: "Health state transitions of a node by domain (tcp, dns_udp, data_udp), address family and states from and to (alive, dead).",
	}, []string{"node", "domain", "family", "from", "to"})
	m.probeRTT = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Name: "health_probe_rtt_seconds",
		Help:    "Round trip of a node's successful health probes by domain (tcp: the TCP probe, dns_udp: the UDP DNS probe) and address family.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"node", "domain", "family"})
	m.probeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "health_probe_failures_total",
		Help: "Failed health probes of a node by domain (tcp, dns_udp).",
	}, []string{"node", "domain"})
	m.switches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "group_switches_total",
		Help: "Changes of a group's effective member by network and reason: manual, lower_latency, strikes, unavailable.",
	}, []string{"group", "network", "reason"})
	m.reloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "reloads_total",
		Help: "Configuration reloads (SIGHUP, PUT /configs) by outcome: success, failure (refused; the running configuration stays).",
	}, []string{"outcome"})
	m.admissionWaits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "admission_waits_total",
		Help: "Dials that had to wait for a dial admission permit, by outcome: admitted, abandoned (the dial's deadline or client ended the wait).",
	}, []string{"outcome"})
	m.admissionWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: namespace, Name: "admission_wait_seconds",
		Help:    "Time dials waited for a dial admission permit, whatever the outcome.",
		Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	})
	for _, o := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(o)
	}
	m.admitted[0] = m.admissionWaits.WithLabelValues("abandoned")
	m.admitted[1] = m.admissionWaits.WithLabelValues("admitted")
	m.known.Store(&known{outbounds: map[string]*outboundCounters{}, inbounds: map[string]bool{}, groups: map[string]bool{}})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.dials, m.dialFailures, m.transitions, m.probeRTT, m.probeFailures,
		m.switches, m.reloads, m.admissionWaits, m.admissionWait,
		&snapshots{m: m},
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, MaxRequestsInFlight: maxScrapes})
	return m
}

// Registry is the metrics' own registry.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Attach makes src what the scrape-time collector reads; nil detaches.
func (m *Metrics) Attach(src Source) {
	if src == nil {
		m.source.Store(nil)
		return
	}
	m.source.Store(&sourceRef{src})
}

// Config is the configuration in force, for Sync: the tags of its
// inbounds, outbounds (the health nodes are outbounds) and groups.
type Config struct {
	Inbounds, Outbounds, Groups []string
}

// Sync publishes the configuration in force: events about anything it does
// not name are dropped from now on, and the series of the outbounds,
// nodes and groups the previous configuration named and c does not are
// deleted.
func (m *Metrics) Sync(c Config) {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	old := m.known.Load()
	k := &known{
		outbounds: make(map[string]*outboundCounters, len(c.Outbounds)),
		inbounds:  make(map[string]bool, len(c.Inbounds)),
		groups:    make(map[string]bool, len(c.Groups)),
	}
	for _, tag := range c.Outbounds {
		oc := old.outbounds[tag]
		if oc == nil {
			oc = m.newOutboundCounters(tag)
		}
		k.outbounds[tag] = oc
	}
	for _, tag := range c.Inbounds {
		k.inbounds[tag] = true
	}
	for _, tag := range c.Groups {
		k.groups[tag] = true
	}
	m.known.Store(k)
	for tag := range old.outbounds {
		if _, ok := k.outbounds[tag]; !ok {
			m.forgetOutbound(tag)
		}
	}
	for tag := range old.groups {
		if !k.groups[tag] {
			m.switches.DeletePartialMatch(prometheus.Labels{"group": tag})
		}
	}
}

// forgetOutbound deletes every series of an outbound and of its node.
func (m *Metrics) forgetOutbound(tag string) {
	m.dials.DeletePartialMatch(prometheus.Labels{"outbound": tag})
	m.dialFailures.DeletePartialMatch(prometheus.Labels{"outbound": tag})
	m.transitions.DeletePartialMatch(prometheus.Labels{"node": tag})
	m.probeRTT.DeletePartialMatch(prometheus.Labels{"node": tag})
	m.probeFailures.DeletePartialMatch(prometheus.Labels{"node": tag})
}
