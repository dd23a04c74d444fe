package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
)

// BenchmarkReportFlow is the reporting cost of one business flow: Begin,
// setup, progress, first response and settlement, on a warm cell.
func BenchmarkReportFlow(b *testing.B) {
	h := newHarness(b, 1)
	sc := scope(target(1), 1)
	h.useful(sc)
	at := h.now()
	b.ReportAllocs()
	for b.Loop() {
		r, _ := h.s.Begin(sc, at)
		r.Setup(at)
		r.Progress(at, 1000, 0)
		r.Response(at)
		r.Progress(at, 0, 1000)
		r.Settle(at)
		at = at.Add(time.Millisecond)
	}
}

// BenchmarkView is one blended read of a warm exact cell.
func BenchmarkView(b *testing.B) {
	h := newHarness(b, 1)
	sc := scope(target(1), 1)
	for range 10 {
		h.useful(sc)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := h.s.View(sc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTablesAtBounds reports the heap both tables hold when full.
func BenchmarkTablesAtBounds(b *testing.B) {
	var bytes uint64
	for b.Loop() {
		bytes = heapOf(func() any { return fillBounds(b, 24) })
	}
	b.ReportMetric(float64(bytes), "heap-B")
	b.ReportMetric(float64(bytes)/float64(score.ExactCells+score.AggregateCells), "B/cell")
}
