package metrics_test

import (
	"errors"
	"net"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/metrics"
	"switchyard/netx"
	"switchyard/track"
)

func benchMetrics() *metrics.Metrics {
	m := metrics.New()
	m.Sync(metrics.Config{Inbounds: []string{"in"}, Outbounds: []string{"hk", "sg"}, Groups: []string{"auto"}})
	return m
}

// The per-flow hook: one dial counted, and a failure with its phase.
func BenchmarkDialed(b *testing.B) {
	m := benchMetrics()
	m.Dialed(netx.TCP, "hk", metrics.DialFailure, netx.PhaseTLS)
	b.ReportAllocs()
	for b.Loop() {
		m.Dialed(netx.TCP, "hk", metrics.DialSuccess, netx.PhaseHandshake)
	}
}

func BenchmarkDialedFailure(b *testing.B) {
	m := benchMetrics()
	m.Dialed(netx.TCP, "hk", metrics.DialFailure, netx.PhaseTLS)
	b.ReportAllocs()
	for b.Loop() {
		m.Dialed(netx.TCP, "hk", metrics.DialFailure, netx.PhaseTLS)
	}
}

func BenchmarkAdmissionWaited(b *testing.B) {
	m := benchMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.AdmissionWaited(3*time.Millisecond, true)
	}
}

func BenchmarkSwitched(b *testing.B) {
	m := benchMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.Switched("auto", netx.TCP, group.SwitchLatency)
	}
}

func BenchmarkProbed(b *testing.B) {
	m := benchMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.Probed(health.NodeID{}, "hk", health.TCP, netx.V4, 42*time.Millisecond, nil)
	}
}

func BenchmarkTransition(b *testing.B) {
	m := benchMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.Transition(health.NodeID{}, "hk", health.TCP, netx.V4, false)
	}
}

var errProbe = errors.New("probe failed")

func BenchmarkProbeFailed(b *testing.B) {
	m := benchMetrics()
	b.ReportAllocs()
	for b.Loop() {
		m.Probed(health.NodeID{}, "hk", health.TCP, netx.V4, 0, errProbe)
	}
}

// nopConn is a conn nothing reads or writes; Close succeeds.
type nopConn struct{ net.Conn }

func (nopConn) Close() error { return nil }

// A scrape with 10,000 open flows over 4 outbounds: the tracker's totals
// are one pass of the table under its lock.
func BenchmarkScrape10kFlows(b *testing.B) {
	m := metrics.New()
	tr := track.New()
	m.Attach(fakeSource{tr})
	outs := []string{"hk", "sg", "jp", "us"}
	m.Sync(metrics.Config{Inbounds: []string{"in"}, Outbounds: outs})
	for i := range 10000 {
		c := tr.Conn(track.Meta{Network: netx.TCP, Inbound: "in", Outbound: outs[i%4] + "@v1"}, nopConn{})
		defer c.Close()
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrackerTotals10kFlows(b *testing.B) {
	tr := track.New()
	for range 10000 {
		c := tr.Conn(track.Meta{Network: netx.TCP, Inbound: "in", Outbound: "hk@v1"}, nopConn{})
		defer c.Close()
	}
	b.ReportAllocs()
	for b.Loop() {
		tr.Totals()
	}
}
