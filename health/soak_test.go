package health_test

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// soakProber behaves by node class and clock time: healthy with a varying
// RTT, dead all along, flapping by the hour, transiently lossy, with a
// broken UDP path, or slow in real time.
type soakProber struct {
	i   int
	clk *healthtest.Clock
	g   *healthtest.Gauge
}

var errSoak = errors.New("soak failure")

func (p *soakProber) outcome(tcp bool) (health.Result, error) {
	now := p.clk.Now().Sub(healthtest.Epoch)
	f := netx.V4
	if p.i%4 == 0 {
		f = netx.V6
	}
	fail := false
	switch p.i % 10 {
	case 0:
		fail = true // dead all day: deep backoff
	case 1:
		fail = int(now/time.Hour)%2 == 1 // flaps hourly
	case 2:
		fail = int(now/time.Second)%3 == 0 // transient loss
	case 3:
		fail = !tcp // UDP blocked
	case 5:
		// Slow: a little real time, so probes pile up to the bound.
		time.Sleep(100 * time.Microsecond)
	}
	if fail {
		return health.Result{}, &health.FamilyError{Family: f, Err: errSoak}
	}
	rtt := time.Duration(20+(p.i*7+int(now/time.Minute))%50) * time.Millisecond
	return health.Result{RTT: rtt, Family: f}, nil
}

func (p *soakProber) TCP(ctx context.Context, url, method string) (health.Result, error) {
	p.g.Enter()
	defer p.g.Leave()
	return p.outcome(true)
}

func (p *soakProber) UDP(ctx context.Context, server netx.Addr) (health.Result, error) {
	p.g.Enter()
	defer p.g.Leave()
	return p.outcome(false)
}

// Soak: 200 scripted nodes probed every 30 s over a simulated day (a
// shorter span under the race detector), with real traffic, reloads and
// idle groups: goroutines and heap stay flat, probe concurrency within its
// bound.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak")
	}
	const nodes, limit = 200, 16
	clk := healthtest.NewClock(healthtest.Epoch)
	g := &healthtest.Gauge{}
	var targets []health.URLTarget
	e := health.New(health.Options{
		Clock:               clk,
		UDPCheckDNS:         []netx.Addr{dnsServer},
		TCPCheckURLs:        []string{"https://www.gstatic.com/generate_204"},
		MaxConcurrentProbes: limit,
		OnDeath:             func(health.NodeID, string) {},
		OnChange:            func(health.NodeID) {},
		URLTargets:          func() []health.URLTarget { return targets },
	})
	defer e.Stop()
	load := func(incarnation func(i int) uint64) {
		list := make([]health.Node, nodes)
		for i := range list {
			list[i] = health.Node{ID: id(i + 1), Name: name(i + 1), Prober: &soakProber{i: i, clk: clk, g: g}, UDP: i%5 != 4, Incarnation: incarnation(i)}
		}
		e.Sync(list)
	}
	load(func(int) uint64 { return 1 })
	var act []health.Activity
	for gi := range 10 {
		a := health.Activity{Group: "g" + itoa(gi), Sleeps: gi%2 == 0, IdleTimeout: time.Duration(gi+1) * 10 * time.Minute}
		for i := gi; i < nodes; i += 10 {
			a.Nodes = append(a.Nodes, id(i+1))
		}
		act = append(act, a)
		targets = append(targets, health.URLTarget{Member: "m" + itoa(gi), URL: "https://check.example/" + itoa(gi), Node: id(gi + 1)})
	}
	e.SyncActivity(act)
	e.Start()
	health.Settle(e)

	type checkpoint struct {
		at         time.Duration
		goroutines int
		heap       uint64
	}
	var cps []checkpoint
	// A probe goroutine that has finished its work may not have exited yet
	// when Settle returns: the count is the least of a few reads.
	measure := func(at time.Duration) {
		n := runtime.NumGoroutine()
		for range 20 {
			if n <= 3 {
				break
			}
			time.Sleep(10 * time.Millisecond)
			health.Settle(e)
			n = min(n, runtime.NumGoroutine())
		}
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		cps = append(cps, checkpoint{at, n, ms.HeapInuse})
	}
	const step = 5 * time.Second
	checkEvery := soakSpan / 12
	for at := time.Duration(0); at < soakSpan; at += step {
		clk.Advance(step)
		health.Settle(e)
		k := int(at / step)
		// Real traffic of some nodes: dials (some slow, some failing) and
		// flow outcomes.
		for j := range 4 {
			i := (k*4 + j) % nodes
			var err error
			if i%10 == 0 || (i%10 == 2 && k%3 == 0) {
				err = errSoak
			}
			lat := 40 * time.Millisecond
			if k%50 < 3 {
				lat = 900 * time.Millisecond
			}
			e.ReportDial(id(i+1), netx.V4, lat, k%7 == 0, err)
			e.ReportTraffic(id(i+1), health.DataUDP, netx.V4, i%10 != 3)
		}
		// Selections wake sleeping groups now and then.
		if k%240 == 0 {
			e.Selected("g" + itoa(k/240%10))
		}
		// A reload every 3 hours: a tenth of the nodes change incarnation.
		if k > 0 && k%(3*720) == 0 {
			round := uint64(k / (3 * 720))
			load(func(i int) uint64 {
				if i%10 == int(round%10) {
					return 1 + round
				}
				return 1
			})
		}
		if k%int(checkEvery/step) == 0 {
			measure(at)
		}
		if g.Peak() > limit {
			t.Fatalf("at %v: %d probes in flight, bound %d", at, g.Peak(), limit)
		}
	}
	measure(soakSpan)
	base := cps[1] // after the first histories are allocated
	for _, c := range cps[1:] {
		t.Logf("%8v: %d goroutines, heap in use %d KiB", c.at, c.goroutines, c.heap>>10)
		if c.goroutines > base.goroutines+2 {
			t.Errorf("at %v: %d goroutines, %d at %v", c.at, c.goroutines, base.goroutines, base.at)
		}
		if c.heap > base.heap+base.heap/4+512<<10 {
			t.Errorf("at %v: heap in use %d KiB, %d KiB at %v", c.at, c.heap>>10, base.heap>>10, base.at)
		}
	}
	t.Logf("%v simulated: peak %d probes in flight (bound %d); goroutines %d..%d; heap in use %d..%d KiB",
		soakSpan, g.Peak(), limit, cps[0].goroutines, cps[len(cps)-1].goroutines, base.heap>>10, cps[len(cps)-1].heap>>10)
	if g.Peak() < limit/2 {
		t.Errorf("peak %d: the bound was never approached, the test proves little", g.Peak())
	}
	if clk.Timers() > 2 {
		t.Errorf("%d fake timers armed (the cycle and recovery timers only)", clk.Timers())
	}
}
