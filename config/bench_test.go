package config

import (
	"bytes"
	"runtime"
	"strconv"
	"testing"

	"switchyard/internal/rulegen"
	"switchyard/spec"
)

// rulesFile is a configuration of n generated rules.
func rulesFile(b *testing.B, n int) []byte {
	var buf bytes.Buffer
	if err := rulegen.TOML(&buf, n); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// BenchmarkParseRules loads files of many rules. Besides time and bytes
// allocated per op, it reports per rule: the time, the bytes allocated while
// loading, and the bytes the spec keeps once loaded (heap growth after a
// collection, with the spec alive and the file text released).
func BenchmarkParseRules(b *testing.B) {
	for _, n := range []int{200_000, 1_000_000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			data := rulesFile(b, n)
			b.ReportAllocs()
			b.ResetTimer()
			var kept *spec.Spec
			var before, after runtime.MemStats
			for range b.N {
				kept = nil
				runtime.GC()
				runtime.ReadMemStats(&before)
				s, _, err := Parse(data, "rules.toml")
				if err != nil {
					b.Fatal(err)
				}
				kept = s
				b.StopTimer()
				runtime.GC()
				runtime.ReadMemStats(&after)
				b.StartTimer()
			}
			b.StopTimer()
			rules := float64(n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/rules, "ns/rule")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/rules, "alloc-B/rule")
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/rules, "kept-B/rule")
			runtime.KeepAlive(kept)
		})
	}
}
