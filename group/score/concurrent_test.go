package score_test

import (
	"sync"
	"testing"
	"time"

	"switchyard/group/score"
)

// Flows, reads, probes and reloads from many goroutines at once: the race
// detector's test, and every flow's outcome counted exactly once.
func TestConcurrentReporting(t *testing.T) {
	h := newHarness(t, 4)
	const workers, flows = 8, 300
	at := h.now()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range flows {
				sc := scope(target(i%16), w%4+1)
				r, err := h.s.Begin(sc, at)
				if err != nil {
					t.Error(err)
					return
				}
				r.Setup(at)
				r.Progress(at, 10, 0)
				r.Response(at)
				if i%10 == 0 {
					r.Fail(at, score.Failure{Kind: score.TargetPath})
				} else {
					r.Settle(at)
				}
				if _, err := h.s.View(sc); err != nil {
					t.Error(err)
				}
				if i%50 == 0 {
					h.s.RecordProbe(grp, sc.Network, sc.Node, at, time.Millisecond, true)
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			h.s.Reload(at, members(4))
		}
	})
	wg.Wait()
	var attempts, outcomes float64
	for n := 1; n <= 4; n++ {
		v := h.view(scope(target(0), n))
		attempts += v.Global.Attempts
		outcomes += v.Global.Successes + v.Global.Failures
	}
	if !near(attempts, workers*flows) || !near(outcomes, workers*flows) {
		t.Fatalf("attempts %v, outcomes %v; want %d each", attempts, outcomes, workers*flows)
	}
}
