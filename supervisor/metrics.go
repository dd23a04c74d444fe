package supervisor

import (
	"context"
	"errors"
	"net"

	"switchyard/fanout"
	"switchyard/group"
	"switchyard/health"
	"switchyard/metrics"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/plane"
)

// The supervisor feeds Options.Metrics: it attaches itself as the source
// of the scrape-time snapshots (the tracker's totals, the admission
// counts, the DNS counters) and hands the metrics' hooks to what it builds:
// every TCP dial of the connector, the health engine's observer, the
// groups' OnSwitch, each generation's admission, and its own reloads.
// After every apply it names the configuration in force, so the series of
// what a reload removed go.

// syncMetrics publishes st's inbounds, outbounds and groups to the metrics
// and bounds the tracker's ended totals by them. sv.mu is held (or sv is
// not yet shared).
func (sv *Supervisor) syncMetrics(st *state) {
	inbounds := make(map[string]bool, len(st.spec.Inbounds))
	c := metrics.Config{}
	for _, in := range st.spec.Inbounds {
		inbounds[in.Tag] = true
		c.Inbounds = append(c.Inbounds, in.Tag)
	}
	sv.tracker.Forget(func(in, out string) bool { return inbounds[in] && st.outbounds[out] != nil })
	m := sv.opts.Metrics
	if m == nil {
		return
	}
	for _, o := range st.spec.Outbounds {
		c.Outbounds = append(c.Outbounds, o.Tag)
	}
	for _, g := range st.spec.Groups {
		c.Groups = append(c.Groups, g.Tag)
	}
	m.Sync(c)
}

// attachMetrics makes sv the source of the metrics' snapshots.
func (sv *Supervisor) attachMetrics() {
	if m := sv.opts.Metrics; m != nil {
		m.Attach(sv)
	}
}

// detachMetrics stops the metrics reading sv (Close).
func (sv *Supervisor) detachMetrics() {
	if m := sv.opts.Metrics; m != nil {
		m.Attach(nil)
	}
}

// countReload counts an apply's outcome; an apply after Close is none.
func (sv *Supervisor) countReload(err error) {
	if m := sv.opts.Metrics; m != nil && !errors.Is(err, net.ErrClosed) {
		m.Reloaded(err == nil)
	}
}

// healthObserver is the engine's observer: the metrics, or none.
func (sv *Supervisor) healthObserver() health.Observer {
	if m := sv.opts.Metrics; m != nil {
		return m
	}
	return nil
}

// switchHook is the groups' OnSwitch: the metrics', or none.
func (sv *Supervisor) switchHook() func(string, netx.Network, group.SwitchReason) {
	if m := sv.opts.Metrics; m != nil {
		return m.Switched
	}
	return nil
}

// observeAdmission has a generation's admission report its waits.
func (sv *Supervisor) observeAdmission(a *netx.Admission) {
	if m := sv.opts.Metrics; m != nil && a != nil {
		a.SetWaitObserver(m.AdmissionWaited)
	}
}

// dialMetrics counts dials by network, outbound tag, result and phase: the
// connector's TCP dials and the UDP fan-out's sub-link opens.
type dialMetrics struct{ m *metrics.Metrics }

// dialed counts one TCP dial of leaf under est that returned err; ctx is
// the client's.
func (d dialMetrics) dialed(ctx context.Context, est *netx.Establishment, leaf *plane.Target, err error) {
	if d.m != nil && leaf != nil {
		d.m.Dialed(netx.TCP, leaf.ID().Tag, dialResult(err, ctx.Err() != nil), est.Phase())
	}
}

// dialResult classifies a dial's outcome; abandoned says the client (or
// the association) went away while it ran.
func dialResult(err error, abandoned bool) metrics.DialResult {
	switch {
	case err == nil:
		return metrics.DialSuccess
	case errors.Is(err, outbound.ErrBlocked):
		return metrics.DialBlocked
	case abandoned || plane.Reloaded(err):
		return metrics.DialAbandoned
	}
	return metrics.DialFailure
}

// packetReports are what a UDP association reports: each leaf's packet
// path to health, each sub-link open to the metrics.
type packetReports struct {
	healthReports
	dials dialMetrics
}

var _ fanout.DialReporter = packetReports{}

// PacketDialed counts one sub-link open (fanout.DialReporter).
func (r packetReports) PacketDialed(leaf *plane.Target, phase netx.Phase, err error, abandoned bool) {
	if r.dials.m != nil && leaf != nil {
		r.dials.m.Dialed(netx.UDP, leaf.ID().Tag, dialResult(err, abandoned), phase)
	}
}
