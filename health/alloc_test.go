package health_test

import (
	"testing"
	"time"

	"switchyard/health"
)

// The reads selection makes, Selected on an awake group and the data
// path's reports that change nothing allocate nothing.
func TestHotPathsAllocFree(t *testing.T) {
	h := newHarness(t, func(o *health.Options) {
		o.URLTargets = func() []health.URLTarget {
			return []health.URLTarget{{Member: "m", URL: "https://u.example/", Node: id(1)}}
		}
	})
	h.register(2)
	h.e.SyncActivity([]health.Activity{{Group: "auto", Sleeps: true, Nodes: []health.NodeID{id(1)}}})
	h.e.ProbeNow(t.Context())
	for range 3 {
		h.e.ReportDial(id(1), v4, 30*time.Millisecond, false, nil)
	}
	var sink int
	for name, f := range map[string]func(){
		"Alive":       func() { sink += b2i(h.e.Alive(id(1), health.TCP, v4)) },
		"UDPEligible": func() { sink += b2i(h.e.UDPEligible(id(1), v6)) },
		"HasUDPState": func() { sink += b2i(h.e.HasUDPState(id(1), v4)) },
		"Latency": func() {
			d, _ := h.e.Latency(id(1), health.DataUDP, v4)
			sink += int(d)
		},
		"Strikes":  func() { sink += h.e.Strikes(id(2)) },
		"Epoch":    func() { sink += int(h.e.Epoch()) },
		"URLAlive": func() { sink += b2i(h.e.URLAlive("m", "https://u.example/")) },
		"URLLatency": func() {
			d, _ := h.e.URLLatency("m", "https://u.example/")
			sink += int(d)
		},
		"Unknown":       func() { sink += b2i(h.e.Alive(id(77), health.TCP, v4)) },
		"Selected":      func() { h.e.Selected("auto") },
		"ReportDial":    func() { h.e.ReportDial(id(1), v4, 30*time.Millisecond, false, nil) },
		"ReportPooled":  func() { h.e.ReportDial(id(1), v4, 0, true, nil) },
		"ReportTraffic": func() { h.e.ReportTraffic(id(1), health.DataUDP, v4, true) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
	_ = sink
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
