package score_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// 10,000 distinct targets over 100 scripted nodes (ten groups of ten)
// through the Engine: ranks, trials, flows of every life, probes, node
// exclusions and reloads. Every table stays within its bound and no
// goroutine is started.
func TestSoakEngine(t *testing.T) {
	const groups, per, targets = 10, 10, 10000
	goroutines := runtime.NumGoroutine()
	clk := healthtest.NewClock(healthtest.Epoch)
	e := score.NewEngine(clk)
	var specs []score.GroupSpec
	for g := range groups {
		s := score.GroupSpec{ID: score.GroupID{0x50, byte(g)}, Members: per}
		for i := range per {
			s.Leaves = append(s.Leaves, score.Leaf{Node: node(g*per + i + 1), Incarnation: 1})
		}
		specs = append(specs, s)
	}
	e.Configure(clk.Now(), specs)
	kinds := []score.FailureKind{score.TargetPath, score.SharedCarrier, score.TargetRefused, score.UnknownPreSetup}
	r := &score.Request{}
	for round := range 2 {
		for i := range targets {
			at := clk.Now()
			g := specs[i%groups]
			r.Group, r.Network, r.Family = g.ID, netx.TCP, netx.V4
			if i%3 == 0 {
				r.Network = netx.UDP
			}
			r.Target = netx.DomainAddr(fmt.Sprintf("soak%05d.example", i), 443)
			r.Cands = r.Cands[:0]
			for j, l := range g.Leaves {
				r.Cands = append(r.Cands, score.Candidate{Node: l.Node, Eligible: (i+j)%17 != 0})
			}
			d := e.Rank(at, r)
			if d.Attempt != nil {
				if f, err := d.Attempt.Begin(at); err == nil {
					f.Setup(at)
					f.Progress(at, 100, 0)
					switch (i + round) % 6 {
					case 0, 1, 2:
						f.Response(at.Add(time.Duration(i%50) * time.Millisecond))
						f.Progress(at.Add(time.Second), 0, 80<<10)
						f.Settle(at.Add(time.Second))
					case 3:
						f.Fail(at, score.Failure{Kind: kinds[i%len(kinds)]})
					case 4:
						f.Cancel(at)
					case 5:
						f.Response(at) // left open
					}
				}
			}
			if i%97 == 0 {
				n := d.Index
				if n >= 0 {
					e.Probe(r.Network, r.Cands[n].Node, at, 20*time.Millisecond, true, 30*time.Second)
				}
			}
			if i%1009 == 0 && d.Index >= 0 {
				e.NodeDown(r.Cands[d.Index].Node, at)
			}
			clk.Advance(5 * time.Millisecond)
			if i%500 == 0 {
				checkBounds(t, e)
			}
		}
		checkBounds(t, e)
		st := e.Stats()
		t.Logf("round %d: cache %+v", round, st.Cache)
		e.Configure(clk.Now(), specs[:groups-round-1]) // a reload dropping a group
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Errorf("goroutines %d → %d", goroutines, n)
	}
}

func checkBounds(t *testing.T, e *score.Engine) {
	t.Helper()
	c := e.Stats().Cache
	if c.ExactCells > score.ExactCells || c.AggregateCells > score.AggregateCells || c.ComparisonCells > score.CompareCells ||
		c.ComparisonBytes > score.CompareBytes || c.HistoryEntries > score.HistoryEntries {
		t.Fatalf("out of bounds: %+v", c)
	}
}

// The whole Engine's heap with 100 nodes and 10,000 distinct targets.
func TestEngineMemoryAtBounds(t *testing.T) {
	b := heapOf(func() any { return fillEngine(t, 100, 10000) })
	t.Logf("Engine after 10,000 targets over 100 nodes: %d KiB", b>>10)
	if b > 16<<20 {
		t.Errorf("Engine at its bounds holds %d bytes", b)
	}
}
