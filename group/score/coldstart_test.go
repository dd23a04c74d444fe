package score_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/netx"
)

// coldScene is the two-node scene of test/netem's Score test on a fake
// clock: node 1 (A) a few milliseconds away, failing the blocked targets
// behind a working proxy (a target-path failure after setup), node 2 (B)
// 50 ms each way, serving every target.
type coldScene struct {
	*eng
	open, blocked []netx.Addr
	seq           map[string]*strings.Builder // per target, the carriers in order (x: failed)
}

const (
	nodeA, nodeB = 1, 2
)

func newColdScene(t *testing.T, open, blocked int) *coldScene {
	s := &coldScene{eng: newEng(t, 2), seq: map[string]*strings.Builder{}}
	for i := range open {
		s.open = append(s.open, target(100+i))
	}
	for i := range blocked {
		s.blocked = append(s.blocked, target(200+i))
	}
	s.probe()
	return s
}

func (s *coldScene) probe() {
	s.e.Probe(netx.TCP, node(nodeA), s.now(), 2*time.Millisecond, true, 10*time.Second)
	s.e.Probe(netx.TCP, node(nodeB), s.now(), 101*time.Millisecond, true, 10*time.Second)
}

func (s *coldScene) isBlocked(tgt netx.Addr) bool {
	for _, b := range s.blocked {
		if b == tgt {
			return true
		}
	}
	return false
}

// flow ranks and begins one flow to tgt through the scene and returns
// its end, run later: the relay ends a flow after the next one ranked.
func (s *coldScene) flow(tgt netx.Addr) func() {
	s.t.Helper()
	r := s.req(tgt)
	d := s.e.Rank(s.now(), r)
	if d.Index < 0 {
		s.t.Fatal("no selection")
	}
	f, err := d.Attempt.Begin(s.now())
	if err != nil {
		s.t.Fatalf("Begin: %v", err)
	}
	at := s.now()
	blocked := s.isBlocked(tgt)
	return func() { s.end(f, r.Cands[d.Index].Node == node(nodeA), blocked, at, tgt) }
}

func (s *coldScene) end(f *score.Flow, onA, blocked bool, at time.Time, tgt netx.Addr) {
	var c byte
	switch {
	case onA && blocked:
		f.Setup(at.Add(3 * time.Millisecond))
		f.Progress(at.Add(3*time.Millisecond), 80, 0)
		f.Fail(at.Add(10*time.Millisecond), score.Failure{Kind: score.TargetPath})
		s.clk.Advance(10 * time.Millisecond)
		c = 'x'
	case onA:
		f.Setup(at.Add(3 * time.Millisecond))
		f.Progress(at.Add(3*time.Millisecond), 80, 0)
		f.Response(at.Add(5 * time.Millisecond))
		f.Progress(at.Add(5*time.Millisecond), 0, 120)
		f.Settle(at.Add(5 * time.Millisecond))
		s.clk.Advance(5 * time.Millisecond)
		c = 'A'
	default:
		f.Setup(at.Add(300 * time.Millisecond))
		f.Progress(at.Add(300*time.Millisecond), 80, 0)
		f.Response(at.Add(500 * time.Millisecond))
		f.Progress(at.Add(500*time.Millisecond), 0, 120)
		f.Settle(at.Add(500 * time.Millisecond))
		s.clk.Advance(500 * time.Millisecond)
		c = 'B'
	}
	k := tgt.String()
	if s.seq[k] == nil {
		s.seq[k] = &strings.Builder{}
	}
	s.seq[k].WriteByte(c)
}

// round is one flow per target, open and blocked targets alternating.
func (s *coldScene) round() {
	var prev func()
	next := func(t netx.Addr) {
		f := s.flow(t)
		if prev != nil {
			prev()
		}
		prev = f
	}
	for i := range max(len(s.open), len(s.blocked)) {
		if i < len(s.open) {
			next(s.open[i])
		}
		if i < len(s.blocked) {
			next(s.blocked[i])
		}
	}
	prev()
}

func (s *coldScene) report() string {
	var b strings.Builder
	for _, t := range append(append([]netx.Addr{}, s.open...), s.blocked...) {
		fmt.Fprintf(&b, "%s %s\n", t, s.seq[t.String()])
	}
	return b.String()
}

// Cold start without a lead-in (bench/score -lead 0): from the first
// round, a fast node failing some targets behind a working proxy keeps
// the targets it serves, and the failed ones move to the slow node that
// serves everything. The fast node's target-path failures count in its
// aggregates (its cold prior for new targets drops to about one half),
// but they neither back it off for the targets it serves nor let a lone
// response measurement of the slow node on a target, or a missing one,
// outweigh a hundredfold probe and setup lead: the targets the fast node
// served cleanly stay on it, and those the slow node's trials took first
// come back once the fast node is compared on them.
func TestColdStartKeepsServedTargetsOnTheFastNode(t *testing.T) {
	for _, c := range []struct{ open, blocked int }{{4, 2}, {3, 3}} {
		t.Run(fmt.Sprintf("%d open %d blocked", c.open, c.blocked), func(t *testing.T) {
			s := newColdScene(t, c.open, c.blocked)
			const rounds = 16
			for r := range rounds {
				if r%4 == 0 {
					s.probe() // every 10 s, as the e2e test's check interval
				}
				s.round()
				s.clk.Advance(time.Second)
			}
			t.Logf("carriers per target (x: failed):\n%s%+v", s.report(), s.stats(netx.TCP))
			var openFlows, openViaA int
			for _, tgt := range s.open {
				seq := s.seq[tgt.String()].String()[1:] // after round 0
				a := strings.Count(seq, "A")
				if strings.Contains(seq, "x") || a*4 < len(seq)*3 {
					t.Errorf("%s, served by both: %s after round 0; want no failure and at least three quarters on A", tgt, seq)
				}
				openFlows, openViaA = openFlows+len(seq), openViaA+a
			}
			if openViaA*4 < openFlows*3 {
				t.Errorf("A carried %d of %d flows to the served targets after round 0; want three quarters", openViaA, openFlows)
			}
			for _, tgt := range s.blocked {
				seq := s.seq[tgt.String()].String()
				first := strings.IndexByte(seq, 'x')
				if first < 0 {
					// A trial of B took its first flow; A never served it.
					first = 0
				}
				if rest := seq[first+1:]; strings.Count(rest, "B") < len(rest)-1 {
					t.Errorf("%s, blocked at A: %s; want every flow after its first failure on B but at most one trial of A", tgt, seq)
				}
			}
		})
	}
}
