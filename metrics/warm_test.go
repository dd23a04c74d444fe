package metrics_test

import (
	"testing"
	"time"

	"switchyard/metrics"
	"switchyard/outbound"
	"switchyard/track"
	"switchyard/warm"
)

// warmSource adds fixed warm states to fakeSource.
type warmSource struct {
	fakeSource
	states []warm.State
}

func (w warmSource) Warm() []warm.State { return w.states }

func TestWarmGaugesAreReadAtScrapeTime(t *testing.T) {
	m := metrics.New()
	src := warmSource{fakeSource: fakeSource{track.New()}, states: []warm.State{
		{Name: "hk", Kind: outbound.WarmPool, Pooled: 1, IdleBound: 59 * time.Second, Owners: warm.OwnSelector},
		{Name: "hy", Kind: outbound.WarmSession, Up: true, Owners: warm.OwnSelector | warm.OwnUDP},
		{Name: "gone", Kind: outbound.WarmPool, Pooled: 2},
	}}
	m.Attach(src)
	m.Sync(metrics.Config{Outbounds: []string{"hk", "hy"}})
	fs := families(t, m)
	mustValue(t, fs, 1, "switchyard_warm_pooled_connections", "node", "hk")
	mustValue(t, fs, 1, "switchyard_warm_session_up", "node", "hy")
	mustValue(t, fs, 59, "switchyard_warm_idle_bound_seconds", "node", "hk")
	mustValue(t, fs, 1, "switchyard_warm_owned", "node", "hk", "owner", "selector")
	mustValue(t, fs, 0, "switchyard_warm_owned", "node", "hk", "owner", "udp")
	mustValue(t, fs, 1, "switchyard_warm_owned", "node", "hy", "owner", "udp")
	if _, ok := value(fs, "switchyard_warm_pooled_connections", "node", "gone"); ok {
		t.Fatal("a node outside the configuration has a series")
	}
	if _, ok := value(fs, "switchyard_warm_session_up", "node", "hk"); ok {
		t.Fatal("a pool node has a session series")
	}
}
