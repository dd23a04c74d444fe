//go:build !race

package metrics_test

import (
	"testing"
	"time"

	"switchyard/metrics"
	"switchyard/netx"
)

// The hooks on the dial path (every dial, every admission wait) allocate
// nothing once an outbound's phase was seen.
func TestDialHooksAllocateNothing(t *testing.T) {
	m := benchMetrics()
	m.Dialed(netx.TCP, "hk", metrics.DialFailure, netx.PhaseTLS) // resolves the tls child
	for name, f := range map[string]func(){
		"success": func() { m.Dialed(netx.TCP, "hk", metrics.DialSuccess, netx.PhaseHandshake) },
		"failure": func() { m.Dialed(netx.TCP, "hk", metrics.DialFailure, netx.PhaseTLS) },
		"wait":    func() { m.AdmissionWaited(time.Millisecond, true) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations per call", name, n)
		}
	}
}
