package score_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/decisions.golden")

// decisionLog runs a long random script over a 24-leaf group (targets,
// targetless work, eligibility churn, probes, useful flows with node- and
// target-dependent latency and goodput, target and node-scoped failures,
// cancellations, unbegun releases, node-down reports, short and long
// clock steps) and logs every rank's decision (index, reason, trial) and
// every candidate's utility.
func decisionLog(tb testing.TB, steps int) string {
	const n = 24
	h := newEng(tb, n)
	rng := rand.New(rand.NewPCG(16, 2))
	kinds := []score.FailureKind{score.TargetPath, score.TargetRefused, score.StreamReset, score.ProxyAuth, score.Framing, score.SharedCarrier}
	var log strings.Builder
	for step := range steps {
		if rng.IntN(7) == 0 {
			for range 1 + rng.IntN(6) {
				i := rng.IntN(n)
				h.e.Probe(netx.TCP, node(i+1), h.now(), time.Duration(5+3*i+rng.IntN(20))*time.Millisecond, rng.IntN(12) != 0, 30*time.Second)
			}
		}
		if rng.IntN(400) == 0 {
			h.e.NodeDown(node(1+rng.IntN(n)), h.now())
		}
		tgt := target(rng.IntN(12))
		if rng.IntN(6) == 0 {
			tgt = netx.Addr{}
		}
		r := h.req(tgt)
		if rng.IntN(3) == 0 {
			r.Family = netx.V6
		}
		for i := range r.Cands {
			r.Cands[i].Eligible = rng.IntN(10) != 0
		}
		if rng.IntN(25) == 0 {
			r.Peek = true
		}
		at := h.now()
		d := h.e.Rank(at, r)
		fmt.Fprintf(&log, "%d %d %s", step, d.Index, d.Reason)
		if d.Attempt != nil && d.Attempt.Trial() {
			log.WriteString(" trial")
		}
		for i := range r.Cands {
			fmt.Fprintf(&log, " %.9g", r.Cands[i].Utility)
		}
		log.WriteByte('\n')
		if d.Attempt != nil {
			if rng.IntN(15) == 0 {
				d.Attempt.Release(at)
			} else if f, err := d.Attempt.Begin(at); err == nil {
				lat := time.Duration(10+7*d.Index+rng.IntN(9)) * time.Millisecond
				if d.Index%5 == 1 && strings.HasPrefix(tgt.String(), "t3") {
					lat += 200 * time.Millisecond
				}
				switch x := rng.IntN(20); {
				case x < 2:
					f.Fail(at, score.Failure{Kind: kinds[rng.IntN(len(kinds))]})
				case x == 2 && d.Index%4 == 0:
					f.Fail(at, score.Failure{Kind: score.TargetPath})
				case x == 3:
					f.Cancel(at)
				case x < 7:
					f.Setup(at)
					f.Progress(at, 100, 0)
					f.Response(at.Add(lat))
					f.Progress(at.Add(lat), 0, 100)
					up := int64(64<<10 + rng.IntN(1<<20))
					f.Progress(at.Add(lat+2*time.Second), up, int64(d.Index+1)*200<<10)
					f.Settle(at.Add(lat + 2*time.Second))
				default:
					runUseful(f, at, lat)
				}
			}
		}
		switch x := rng.IntN(100); {
		case x == 0:
			h.clk.Advance(time.Duration(60+rng.IntN(600)) * time.Second)
		case x < 10:
			h.clk.Advance(time.Duration(rng.IntN(15000)) * time.Millisecond)
		default:
			h.clk.Advance(time.Duration(rng.IntN(1500)) * time.Millisecond)
		}
	}
	return log.String()
}

// The decision log of a long random script is the recorded one: ranking
// optimizations must not change a decision or a utility.
func TestDecisionLogGolden(t *testing.T) {
	got := decisionLog(t, 6000)
	path := filepath.Join("testdata", "decisions.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("decision log differs at line %d:\n got %s\nwant %s", i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("decision log length %d, want %d", len(gl), len(wl))
	}
}
