package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
)

// DialResult is how a TCP dial of an outbound ended.
type DialResult uint8

const (
	DialSuccess   DialResult = iota
	DialFailure              // counted by phase in dial_failures_total too
	DialAbandoned            // the client left, or a reload overtook the dial: says nothing of the outbound
	DialBlocked              // a block outbound refused, as configured
	nResults
)

var resultNames = [nResults]string{"success", "failure", "abandoned", "blocked"}

// phaseNames are the phase label values, by netx.Phase: what the
// establishment distinguishes, in the order a proxied dial runs them.
var phaseNames = [...]string{
	netx.PhaseRouting:   "routing",
	netx.PhaseResolve:   "resolve",
	netx.PhaseAdmission: "admission",
	netx.PhaseConnect:   "connect",
	netx.PhaseTLS:       "tls",
	netx.PhaseTransport: "transport",
	netx.PhaseQUIC:      "quic",
	netx.PhaseTunnel:    "tunnel",
	netx.PhaseHandshake: "handshake",
}

// PhaseName is the phase label value of p.
func PhaseName(p netx.Phase) string {
	if int(p) < len(phaseNames) {
		return phaseNames[p]
	}
	return "unknown"
}

// outboundCounters are one outbound's dial counters: the results resolved
// when Sync first names it, each phase's failures when it first fails in
// that phase.
type outboundCounters struct {
	tag     string
	results [nResults]prometheus.Counter
	phases  [len(phaseNames) + 1]atomic.Pointer[prometheus.Counter] // the last: unknown
}

func (m *Metrics) newOutboundCounters(tag string) *outboundCounters {
	oc := &outboundCounters{tag: tag}
	for r := range nResults {
		oc.results[r] = m.dials.WithLabelValues(tag, resultNames[r])
	}
	return oc
}

// phase is the failure counter of phase p, resolved on first use.
func (m *Metrics) phase(oc *outboundCounters, p netx.Phase) prometheus.Counter {
	i := min(int(p), len(phaseNames))
	if c := oc.phases[i].Load(); c != nil {
		return *c
	}
	c := m.dialFailures.WithLabelValues(oc.tag, PhaseName(p))
	oc.phases[i].CompareAndSwap(nil, &c)
	if m.known.Load().outbounds[oc.tag] != oc {
		// A reload removed the outbound meanwhile: its series stay deleted.
		m.dialFailures.DeleteLabelValues(oc.tag, PhaseName(p))
	}
	return c
}

// Dialed counts one TCP dial of outbound (its tag) and, for a failure, the
// phase it failed in. It allocates nothing once the phase was seen.
func (m *Metrics) Dialed(outbound string, r DialResult, p netx.Phase) {
	oc := m.known.Load().outbounds[outbound]
	if oc == nil || r >= nResults {
		return
	}
	oc.results[r].Inc()
	if r == DialFailure {
		m.phase(oc, p).Inc()
	}
}

// AdmissionWaited counts one wait for a dial admission permit
// (netx.Admission.SetWaitObserver).
func (m *Metrics) AdmissionWaited(d time.Duration, admitted bool) {
	i := 0
	if admitted {
		i = 1
	}
	m.admitted[i].Inc()
	m.admissionWait.Observe(d.Seconds())
}

// Reloaded counts one reload by outcome.
func (m *Metrics) Reloaded(ok bool) {
	o := "failure"
	if ok {
		o = "success"
	}
	m.reloads.WithLabelValues(o).Inc()
}

// Switched counts one change of a group's effective member
// (group.Options.OnSwitch).
func (m *Metrics) Switched(g string, network netx.Network, reason group.SwitchReason) {
	if !m.known.Load().groups[g] {
		return
	}
	m.switches.WithLabelValues(g, network.String(), string(reason)).Inc()
}

var _ health.Observer = (*Metrics)(nil)

func familyName(f netx.Family) string {
	if f == netx.V6 {
		return "ipv6"
	}
	return "ipv4"
}

func stateName(alive bool) string {
	if alive {
		return "alive"
	}
	return "dead"
}

// Transition counts one health state transition of a node (health.Observer).
func (m *Metrics) Transition(_ health.NodeID, name string, d health.Domain, f netx.Family, alive bool) {
	if m.known.Load().outbounds[name] == nil {
		return
	}
	m.transitions.WithLabelValues(name, d.String(), familyName(f), stateName(!alive), stateName(alive)).Inc()
}

// Probed records one health probe of a node (health.Observer): its RTT, or
// its failure.
func (m *Metrics) Probed(_ health.NodeID, name string, d health.Domain, f netx.Family, rtt time.Duration, err error) {
	if m.known.Load().outbounds[name] == nil {
		return
	}
	if err != nil {
		m.probeFailures.WithLabelValues(name, d.String()).Inc()
		return
	}
	m.probeRTT.WithLabelValues(name, d.String(), familyName(f)).Observe(rtt.Seconds())
}
