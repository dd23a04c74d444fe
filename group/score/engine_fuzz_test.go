package score_test

import (
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

// FuzzEngine drives the Engine with an arbitrary script of ranks (every
// kind), attempts, flow lives, probes, exclusions, clock steps and
// reloads: no panic, a decision in range and never the excluded node, a
// reason exactly for authorized multi-candidate ranks, caches within
// their bounds and the budget ledger's inequality intact.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{0, 0, 0, 8, 8, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15})
	f.Fuzz(func(t *testing.T, script []byte) {
		clk := healthtest.NewClock(healthtest.Epoch)
		e := score.NewEngine(clk)
		e.Configure(clk.Now(), []score.GroupSpec{spec(grp, 6)})
		var pending []*score.Attempt
		var flows []*score.Flow
		for i := 0; i+1 < len(script); i += 2 {
			op, arg := script[i]%8, int(script[i+1])
			at := clk.Now()
			switch op {
			case 0, 1: // a rank
				r := &score.Request{Group: grp, Network: netx.Network(arg & 1), Family: netx.V4}
				if arg&2 != 0 {
					r.Target = target(arg % 7)
				}
				n := 1 + arg%6
				for j := range n {
					r.Cands = append(r.Cands, score.Candidate{Node: node(j + 1), Eligible: (arg>>j)&1 == 0 || j == 0})
				}
				switch arg % 5 {
				case 1:
					r.Peek = true
				case 2:
					r.Retry, r.Exclude = true, node(1)
				case 3:
					r.LastResort = true
				}
				if r.Peek {
					// The readonly explanation: in range, and it changes nothing.
					before := e.State()
					ex, ok := e.Explain(at, score.ExplainQuery{Group: grp, Network: r.Network, Family: netx.Family(arg >> 7), Target: r.Target, Cands: r.Cands})
					if !ok || ex.Selected < -1 || ex.Selected >= n {
						t.Fatalf("explanation %v %+v", ok, ex)
					}
					for _, m := range ex.Members {
						if m.Member < 0 || m.Member >= n || m.Member == ex.Selected {
							t.Fatalf("member %+v of %d", m, n)
						}
					}
					for _, rel := range ex.Relations {
						if rel.Member < 0 || rel.Member >= n || rel.SelectionMs < 0 || rel.ChallengerMs < 0 || !rel.ExpiresAt.After(at) {
							t.Fatalf("relation %+v at %v", rel, at)
						}
					}
					if ex.NextBusinessFlow != nil && (ex.NextBusinessFlow.Member < 0 || ex.NextBusinessFlow.Member >= n) {
						t.Fatalf("next business flow %+v", ex.NextBusinessFlow)
					}
					if after := e.State(); after != before {
						t.Fatalf("Explain moved state:\n%s\n---\n%s", before, after)
					}
				}
				d := e.Rank(at, r)
				if d.Index < -1 || d.Index >= n {
					t.Fatalf("index %d of %d", d.Index, n)
				}
				if d.Index >= 0 && r.Retry && r.Cands[d.Index].Node == r.Exclude {
					t.Fatal("the excluded node was chosen")
				}
				if (r.Peek || r.Retry || r.LastResort) && d.Reason != score.NoReason {
					t.Fatalf("a neutral rank counted %v", d.Reason)
				}
				if d.Attempt != nil {
					pending = append(pending, d.Attempt)
				}
			case 2: // begin or release the oldest pending attempt
				if len(pending) == 0 {
					continue
				}
				a := pending[0]
				pending = pending[1:]
				if arg&1 == 0 {
					a.Release(at)
				} else if fl, err := a.Begin(at); err == nil {
					flows = append(flows, fl)
				}
			case 3: // a flow event
				if len(flows) == 0 {
					continue
				}
				fl := flows[arg%len(flows)]
				switch arg % 7 {
				case 0:
					fl.Setup(at)
				case 1:
					fl.Progress(at, int64(arg)<<10, 0)
				case 2:
					fl.Response(at)
				case 3:
					fl.Progress(at, 0, int64(arg)<<12)
				case 4:
					fl.Settle(at)
				case 5:
					fl.Fail(at, score.Failure{Kind: score.FailureKind(arg % 24)})
				case 6:
					fl.Cancel(at)
				}
			case 4:
				e.Probe(netx.Network(arg&1), node(arg%6+1), at, time.Duration(arg)*time.Millisecond, arg%3 != 0, time.Duration(arg%4-1)*15*time.Second)
			case 5:
				if arg&8 != 0 {
					e.Pressure(node(arg%6+1), netx.Network(arg>>4&1), at.Add(-time.Duration(arg)*time.Second))
				} else {
					e.NodeDown(node(arg%6+1), at)
				}
			case 6:
				clk.Advance(time.Duration(arg) * 137 * time.Millisecond)
			case 7:
				if arg%16 == 0 {
					e.Configure(at, []score.GroupSpec{spec(grp, 2+arg%5)})
				}
			}
		}
		st := e.Stats()
		c := st.Cache
		if c.ExactCells > score.ExactCells || c.ComparisonCells > score.CompareCells || c.ComparisonBytes > score.CompareBytes || c.HistoryEntries > score.HistoryEntries {
			t.Fatalf("bounds: %+v", c)
		}
		for _, g := range st.Groups {
			if g.Budget.Reserved < 0 || g.Budget.Spent < 0 {
				t.Fatalf("budget %+v", g.Budget)
			}
		}
		if err := e.CheckLedgers(); err != nil {
			t.Fatal(err)
		}
		for _, a := range pending {
			a.Release(clk.Now())
		}
	})
}
