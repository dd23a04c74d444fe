package score

import (
	"fmt"
	"testing"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

type fixedClock struct{ t *time.Time }

func (c fixedClock) Now() time.Time { return *c.t }

func poolNode(i int) health.NodeID { return health.NodeID{0xbe, 0xef, 0, byte(i)} }

// FuzzPoolApply drives a pool through Demand, Applies, failures,
// exclusions, reloads and plans from the fuzzer's bytes, next to a twin
// whose every Apply takes the full path: the quiet fast path must commit
// exactly what the full path commits, and the pool's invariants hold
// after every step.
func FuzzPoolApply(f *testing.F) {
	f.Add([]byte{2, 0, 200, 1, 60, 2, 3, 5, 3, 5, 3, 5, 2, 1, 60, 2})
	f.Add([]byte{0, 255, 0, 255, 2, 1, 30, 2, 1, 30, 2, 6, 3, 2, 9, 4, 2, 1, 60, 2})
	f.Add([]byte{7, 12, 2, 7, 13, 2, 7, 12, 1, 6, 2, 4, 12, 2, 8, 2, 10, 2})
	f.Add([]byte{0, 100, 2, 1, 255, 2, 1, 255, 2, 0, 5, 9, 1, 2, 1, 60, 2, 6, 1, 6, 2, 2})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 600 {
			ops = ops[:600]
		}
		now := time.Unix(1_700_000_000, 0)
		clk := fixedClock{&now}
		a := NewPool(clk, GroupID{1}, netx.TCP)
		b := NewPool(clk, GroupID{1}, netx.TCP)
		type cand struct {
			present, eligible bool
			utility           int
			rep               int
		}
		cs := make([]cand, 14) // 0–11 direct, 12 and 13 nested "n12", "n13"
		for i := range cs {
			cs[i] = cand{present: true, eligible: true, utility: i % 5, rep: 20 + i}
		}
		winner := -1
		view := func() []Candidate {
			var out []Candidate
			for i, c := range cs {
				if !c.present {
					continue
				}
				x := Candidate{Node: poolNode(i), Eligible: c.eligible, Utility: float64(c.utility), Winner: i == winner}
				if i >= 12 {
					x.Subgroup, x.Node = fmt.Sprintf("n%d", i), poolNode(c.rep)
				}
				out = append(out, x)
			}
			return out
		}
		var plans []Plan
		arg := func(i int) int {
			if i+1 < len(ops) {
				return int(ops[i+1])
			}
			return 0
		}
		for i := 0; i < len(ops); i += 2 {
			x := arg(i)
			switch ops[i] % 11 {
			case 0:
				for range x {
					a.Demand(now)
					b.Demand(now)
				}
			case 1:
				now = now.Add(time.Duration(x) * 10 * time.Second)
			case 2:
				v := view()
				a.Rerank(now, v)
				b.mu.Lock()
				b.commit(now.UnixNano(), v)
				b.mu.Unlock()
			case 3:
				a.NodeFailed(poolNode(x%14), now)
				b.NodeFailed(poolNode(x%14), now)
			case 4:
				a.Excluded(poolNode(x % 14))
				b.Excluded(poolNode(x % 14))
			case 5:
				a.NodeOK(poolNode(x % 14))
				b.NodeOK(poolNode(x % 14))
			case 6:
				c := &cs[x%14]
				c.eligible = !c.eligible
				c.utility = x / 14 % 7
			case 7:
				cs[x%14].present = !cs[x%14].present
			case 8:
				a.Reload()
				b.Reload()
			case 9:
				winner = x%15 - 1
			case 10:
				c := &cs[12+x%2]
				c.rep = x % 24 // sometimes a direct member's node
			}
			if pl, err := a.Plan(now, DirectKey(poolNode(x%12))); err == nil {
				if len(plans) == 16 {
					plans = plans[1:]
				}
				plans = append(plans, pl)
			}
			checkPool(t, a, b, plans)
		}
	})
}

func checkPool(t *testing.T, a, b *Pool, plans []Plan) {
	t.Helper()
	ma, mb := a.Members(), b.Members()
	if fmt.Sprint(ma) != fmt.Sprint(mb) || a.Capacity() != b.Capacity() || a.gen != b.gen {
		t.Fatalf("the quiet path diverged:\n quiet %v k %d gen %d\n full  %v k %d gen %d",
			ma, a.Capacity(), a.gen, mb, b.Capacity(), b.gen)
	}
	if len(ma) > a.Capacity() || a.Capacity() > MaxPool {
		t.Fatalf("%d members over k %d", len(ma), a.Capacity())
	}
	seen := map[Key]bool{}
	for i, s := range ma {
		if seen[s.Key] {
			t.Fatalf("member %v twice", s.Key)
		}
		seen[s.Key] = true
		if s.Rotation && i != len(ma)-1 {
			t.Fatalf("rotation slot at %d of %d", i, len(ma))
		}
	}
	for _, pl := range plans {
		err := a.Begin(pl)
		member := a.Contains(pl.key) && pl.epoch == a.epoch
		if (err == nil) != member {
			t.Fatalf("Begin = %v for a plan whose slot is member %v", err, member)
		}
	}
}
