package metrics_test

import (
	"errors"
	"testing"
	"time"

	"switchyard/group"
	"switchyard/health"
	"switchyard/metrics"
	"switchyard/netx"
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
