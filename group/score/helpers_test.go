package score_test

import (
	"fmt"
	"testing"
	"time"

	"switchyard/group/score"
	"switchyard/health"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

var grp = score.GroupID{0xaa, 1}

func node(i int) health.NodeID { return health.NodeID{0xbe, 0xef, byte(i >> 8), byte(i)} }

func target(i int) netx.Addr { return netx.DomainAddr(fmt.Sprintf("t%d.example", i), 443) }

func scope(tgt netx.Addr, n int) score.Scope {
	return score.Scope{Group: grp, Network: netx.TCP, Family: netx.V4, Target: tgt, Node: node(n)}
}

func members(nodes int) []score.Member {
	ms := make([]score.Member, nodes)
	for i := range ms {
		ms[i] = score.Member{Group: grp, Node: node(i + 1), Incarnation: 1}
	}
	return ms
}

type harness struct {
	t   testing.TB
	clk *healthtest.Clock
	s   *score.Scorer
}

func newHarness(t testing.TB, nodes int) *harness {
	clk := healthtest.NewClock(healthtest.Epoch)
	return &harness{t: t, clk: clk, s: score.New(clk, members(nodes))}
}

func (h *harness) now() time.Time { return h.clk.Now() }

func (h *harness) begin(sc score.Scope) *score.Reporter {
	h.t.Helper()
	r, err := h.s.Begin(sc, h.now())
	if err != nil {
		h.t.Fatalf("Begin: %v", err)
	}
	return r
}

// open begins a flow, sets it up and sends: it is ready for eligible RX.
func (h *harness) open(sc score.Scope) *score.Reporter {
	r := h.begin(sc)
	r.Setup(h.now())
	r.Progress(h.now(), 100, 0)
	return r
}

// live opens a flow and gives it eligible RX now.
func (h *harness) live(sc score.Scope) *score.Reporter {
	r := h.open(sc)
	r.Response(h.now())
	return r
}

// useful runs one useful completion now.
func (h *harness) useful(sc score.Scope) {
	h.live(sc).Settle(h.now())
}

func (h *harness) fail(sc score.Scope, k score.FailureKind) {
	h.open(sc).Fail(h.now(), score.Failure{Kind: k})
}

func (h *harness) view(sc score.Scope) score.View {
	h.t.Helper()
	v, err := h.s.View(sc)
	if err != nil {
		h.t.Fatalf("View: %v", err)
	}
	return v
}
