//go:build linux

package health_test

import (
	"runtime"
	"syscall"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// BenchmarkEngineReads is one selection's reads of a node: Alive,
// UDPEligible and Latency, from every core at once.
func BenchmarkEngineReads(b *testing.B) {
	clk := healthtest.NewClock(healthtest.Epoch)
	e := health.New(health.Options{Clock: clk, UDPCheckDNS: []netx.Addr{dnsServer}})
	defer e.Stop()
	nodes := make([]health.Node, 64)
	for i := range nodes {
		nodes[i] = health.Node{ID: id(i + 1), Name: name(i + 1), Prober: &healthtest.Prober{}, UDP: true}
	}
	e.Sync(nodes)
	e.ProbeNow(b.Context())
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i, sink := 0, 0
		for pb.Next() {
			x := id(i%64 + 1)
			if e.Alive(x, health.TCP, netx.V4) && e.UDPEligible(x, netx.V4) {
				d, _ := e.Latency(x, health.TCP, netx.V4)
				sink += int(d)
			}
			i++
		}
		_ = sink
	})
}

// BenchmarkEngineCycle1000 is the cost of 1,000 nodes probed (TCP and UDP)
// every 30 s: one op is a 30 s period on the fake clock (a cycle and six
// recovery passes) with probes answered at once. It reports the engine's
// heap per node and the process CPU per node and cycle.
func BenchmarkEngineCycle1000(b *testing.B) {
	const n = 1000
	probers := make([]health.Prober, n)
	for i := range probers {
		probers[i] = &healthtest.Prober{}
	}
	nodes := make([]health.Node, n)
	for i := range nodes {
		nodes[i] = health.Node{ID: id(i + 1), Name: name(i + 1), Prober: probers[i], UDP: true, Incarnation: 1}
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	clk := healthtest.NewClock(healthtest.Epoch)
	e := health.New(health.Options{Clock: clk, UDPCheckDNS: []netx.Addr{dnsServer}, TCPCheckURLs: []string{health.DefaultDelayURL}})
	defer e.Stop()
	e.Sync(nodes)
	e.Start()
	health.Settle(e)
	clk.Advance(health.DefaultCheckInterval)
	health.Settle(e)
	perNode := float64(heap()-before) / n
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b.ResetTimer()
	c0 := cpu()
	for b.Loop() {
		clk.Advance(health.DefaultCheckInterval)
		health.Settle(e)
	}
	c1 := cpu()
	b.ReportMetric(perNode, "B/node")
	b.ReportMetric(float64(c1-c0)/float64(b.N)/n, "cpu-ns/node-cycle")
}
