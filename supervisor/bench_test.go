package supervisor

import (
	"bytes"
	"log/slog"
	"runtime"
	"strconv"
	"testing"

	"switchyard/config"
	"switchyard/internal/rulegen"
	"switchyard/plane"
)

// BenchmarkCompileRules prepares the plane of a file of many rules (the
// rules of internal/rulegen, loaded by config.Parse). Besides time and bytes
// allocated per op, it reports per rule: the time of the prepare, the bytes
// it allocates, and the bytes the plane keeps once the spec is dropped
// (heap growth after a collection, with only the plane alive).
func BenchmarkCompileRules(b *testing.B) {
	for _, n := range []int{200_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			var buf bytes.Buffer
			if err := rulegen.TOML(&buf, n); err != nil {
				b.Fatal(err)
			}
			data := buf.Bytes()
			var kept *plane.Plane
			var empty, start, end, held runtime.MemStats
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				kept = nil
				runtime.GC()
				runtime.ReadMemStats(&empty)
				s, _, err := config.Parse(data, "rules.toml")
				if err != nil {
					b.Fatal(err)
				}
				deps, err := dependencies(s, nil, nil, slog.New(slog.DiscardHandler))
				if err != nil {
					b.Fatal(err)
				}
				runtime.ReadMemStats(&start)
				b.StartTimer()
				p, err := prepare(nil, s, deps)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				runtime.ReadMemStats(&end)
				kept = p.plane
				p, s = nil, nil
				runtime.GC()
				runtime.ReadMemStats(&held)
				b.StartTimer()
			}
			b.StopTimer()
			rules := float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rules, "ns/rule")
			b.ReportMetric(float64(end.TotalAlloc-start.TotalAlloc)/rules, "alloc-B/rule")
			b.ReportMetric(float64(int64(held.HeapAlloc)-int64(empty.HeapAlloc))/rules, "kept-B/rule")
			runtime.KeepAlive(kept)
		})
	}
}
