package health_test

import (
	"sync"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// recorder is an Observer that keeps what it heard.
type recorder struct {
	mu          sync.Mutex
	transitions []string // "name domain/family alive|dead"
	rtts        []time.Duration
	failures    int
}

func (r *recorder) Transition(_ health.NodeID, name string, d health.Domain, f netx.Family, alive bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	to := "dead"
	if alive {
		to = "alive"
	}
	r.transitions = append(r.transitions, name+" "+d.String()+"/"+f.String()+" "+to)
}

func (r *recorder) Probed(_ health.NodeID, _ string, d health.Domain, _ netx.Family, rtt time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failures++
		return
	}
	if d == health.TCP {
		r.rtts = append(r.rtts, rtt)
	}
}

// The observer hears each probe (its RTT or its failure) and each
// transition, once, with the state's domain and family.
func TestObserverHearsProbesAndTransitions(t *testing.T) {
	rec := &recorder{}
	h := newHarness(t, func(o *health.Options) { o.Observer = rec })
	h.register(1)
	h.pastGrace()
	h.p(1).SetTCP(healthtest.OK(42 * time.Millisecond))
	h.probe(1)
	h.p(1).SetTCP(healthtest.Fail())
	for range health.ProbeFailures {
		h.probe(1)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.rtts) == 0 || rec.rtts[0] != 42*time.Millisecond {
		t.Errorf("probe RTTs %v, want 42ms first", rec.rtts)
	}
	if rec.failures < health.ProbeFailures {
		t.Errorf("%d probe failures heard, want at least %d", rec.failures, health.ProbeFailures)
	}
	if len(rec.transitions) != 1 || rec.transitions[0] != "n1 tcp/V4 dead" {
		t.Errorf("transitions %v, want [n1 tcp/V4 dead]", rec.transitions)
	}
}
