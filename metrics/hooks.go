package metrics

import (
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"switchyard/group"
	"switchyard/health"
	"switchyard/netx"
)

// DialResult is how a dial of an outbound ended.
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

// networks are the network label values, by netx.Network.
var networks = [...]netx.Network{netx.TCP, netx.UDP}

// outboundCounters are one outbound's dial counters per network: the
// results resolved when Sync first names it, each phase's failures when
// it first fails in that phase.
type outboundCounters struct {
	tag     string
	results [len(networks)][nResults]prometheus.Counter
	phases  [len(networks)][len(phaseNames) + 1]atomic.Pointer[prometheus.Counter] // the last: unknown
}

func (m *Metrics) newOutboundCounters(tag string) *outboundCounters {
	oc := &outboundCounters{tag: tag}
	for n, network := range networks {
		for r := range nResults {
			oc.results[n][r] = m.dials.WithLabelValues(network.String(), tag, resultNames[r])
		}
	}
	return oc
}

// phase is the failure counter of phase p on network n, resolved on first
// use.
func (m *Metrics) phase(oc *outboundCounters, n int, p netx.Phase) prometheus.Counter {
	i := min(int(p), len(phaseNames))
	if c := oc.phases[n][i].Load(); c != nil {
		return *c
	}
	network := networks[n].String()
	c := m.dialFailures.WithLabelValues(network, oc.tag, PhaseName(p))
	oc.phases[n][i].CompareAndSwap(nil, &c)
	if m.known.Load().outbounds[oc.tag] != oc {
		// A reload removed the outbound meanwhile: its series stay deleted.
		m.dialFailures.DeleteLabelValues(network, oc.tag, PhaseName(p))
	}
	return c
}

// Dialed counts one dial of outbound (its tag) on network (a TCP flow's
// dial, a UDP sub-link's open) and, for a failure, the phase it failed
// in. It allocates nothing once the phase was seen.
func (m *Metrics) Dialed(network netx.Network, outbound string, r DialResult, p netx.Phase) {
	oc := m.known.Load().outbounds[outbound]
	if oc == nil || r >= nResults || int(network) >= len(networks) {
		return
	}
	oc.results[network][r].Inc()
	if r == DialFailure {
		m.phase(oc, int(network), p).Inc()
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
