package score_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// 10,000 distinct targets over 100 scripted nodes: every flow reports a
// scripted life (useful, failed with a kind of either provenance, cancelled,
// TX-only); the tables stay within their bounds and no goroutine is started.
func TestSoakBounds(t *testing.T) {
	const nodes, targets = 100, 10000
	goroutines := runtime.NumGoroutine()
	h := newHarness(t, nodes)
	kinds := []score.FailureKind{score.TargetPath, score.SharedCarrier, score.TargetRefused, score.UnknownPreSetup}
	for round := range 3 {
		for i := range targets {
			sc := scope(target(i), i%nodes+1)
			if i%3 == 0 {
				sc.Network = netx.UDP
			}
			if i%5 == 0 {
				sc.Family = netx.V6
			}
			r, err := h.s.Begin(sc, h.now())
			if err != nil {
				continue // a node the last reload removed
			}
			r.Setup(h.now())
			r.Progress(h.now(), 100, 0)
			switch (i + round) % 7 {
			case 0, 1, 2:
				r.Response(h.now())
				r.Settle(h.now())
			case 3:
				r.Fail(h.now(), score.Failure{Kind: kinds[i%len(kinds)]})
			case 4:
				r.Cancel(h.now())
			case 5:
				r.Progress(h.now(), 4096, 0)
				r.Settle(h.now())
			case 6:
				r.Response(h.now()) // left open
			}
			if i%100 == 0 {
				h.s.RecordProbe(grp, sc.Network, sc.Node, h.now(), 20*time.Millisecond, true)
			}
			if _, err := h.s.View(scope(target(i/2), i%nodes+1)); err != nil {
				t.Fatal(err)
			}
			h.clk.Advance(10 * time.Millisecond)
			if e, a := h.s.Cells(); e > score.ExactCells || a > score.AggregateCells {
				t.Fatalf("cells %d exact, %d aggregate", e, a)
			}
		}
		e, a := h.s.Cells()
		t.Logf("round %d: %d exact, %d aggregate cells", round, e, a)
		if e != score.ExactCells {
			t.Errorf("round %d: exact table not full: %d", round, e)
		}
		// Each round ends with a reload removing ten more nodes.
		h.s.Reload(h.now(), members(nodes-(round+1)*10))
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("goroutines %d → %d", goroutines, n)
	}
}

// heapOf returns the live heap fill has retained, measured across GCs.
func heapOf(fill func() any) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	keep := fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(keep)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// fillBounds returns a scorer with both tables full: 4,096 exact cells of
// targets with names of nameLen bytes, and 4,096 aggregate cells.
func fillBounds(tb testing.TB, nameLen int) *score.Scorer {
	h := newHarness(tb, 100)
	ms := members(100)
	for i := range 1400 { // 1,400 groups × (global + two families) ≥ 4,096 aggregates
		ms = append(ms, score.Member{Group: score.GroupID{0xdd, byte(i >> 8), byte(i)}, Node: node(1), Incarnation: 1})
	}
	h.s.Reload(h.now(), ms)
	pad := strings.Repeat("x", max(0, nameLen-len("t00000.")))
	for i := range score.ExactCells {
		sc := scope(netx.DomainAddr(fmt.Sprintf("t%05d.%s", i, pad), 443), i%100+1)
		h.useful(sc)
	}
	for _, m := range ms[100:] {
		for _, f := range []netx.Family{netx.V4, netx.V6} {
			sc := score.Scope{Group: m.Group, Network: netx.TCP, Family: f, Node: m.Node}
			h.begin(sc).Cancel(h.now())
		}
	}
	if e, a := h.s.Cells(); e != score.ExactCells || a != score.AggregateCells {
		tb.Fatalf("not at the bounds: %d exact, %d aggregate", e, a)
	}
	return h.s
}

func TestMemoryAtBounds(t *testing.T) {
	for _, n := range []int{24, score.MaxNameLen} {
		b := heapOf(func() any { return fillBounds(t, n) })
		t.Logf("both tables full, %d-byte names: %d KiB (%.0f B per cell)", n, b>>10, float64(b)/float64(score.ExactCells+score.AggregateCells))
		if b > 8<<20 {
			t.Errorf("tables at their bounds hold %d bytes", b)
		}
	}
}
