package fakeip

import (
	"fmt"
	"testing"
)

func BenchmarkLookupHit(b *testing.B) {
	tb := mustNew(b, Config{IPv4: v4Range, IPv6: v6Range})
	tb.Lookup("www.example.com")
	b.ReportAllocs()
	for b.Loop() {
		tb.Lookup("www.example.com.")
	}
}

// BenchmarkLookupRecycle allocates in a full table: every lookup recycles.
func BenchmarkLookupRecycle(b *testing.B) {
	tb := mustNew(b, Config{IPv4: v4Range, Size: 1024})
	names := make([]string, 4096)
	for i := range names {
		names[i] = fmt.Sprintf("host%d.example", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		tb.Lookup(names[i%len(names)])
		i++
	}
}
