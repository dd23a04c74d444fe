package score_test

import (
	"testing"

	"switchyard/group/score"
	"switchyard/health/healthtest"
	"switchyard/netx"
)

func TestPoolsOnePerGroupAndNetwork(t *testing.T) {
	clk := healthtest.NewClock(healthtest.Epoch)
	other := score.GroupID{0xbb}
	ps := score.NewPools(clk, []score.GroupID{grp, other})
	tcp, udp := ps.Get(grp, netx.TCP), ps.Get(grp, netx.UDP)
	if tcp == nil || udp == nil || tcp == udp || ps.Get(grp, netx.TCP) != tcp {
		t.Fatal("not one pool per group and network")
	}
	if tcp.Group != grp || tcp.Network != netx.TCP || udp.Network != netx.UDP {
		t.Fatal("a pool does not carry its identity")
	}
	if ps.Get(score.GroupID{0xcc}, netx.TCP) != nil {
		t.Fatal("a pool for an unconfigured group")
	}
	gone := ps.Get(other, netx.TCP)
	h := newPool(t, 10)
	tcp.Demand(clk.Now())
	tcp.Rerank(clk.Now(), h.cands)
	gone.Rerank(clk.Now(), h.cands)
	pl, err := tcp.Plan(clk.Now(), score.DirectKey(node(10)))
	if err != nil {
		t.Fatal(err)
	}
	d := tcp.Projected()

	ps.Reload([]score.GroupID{grp})
	if ps.Len() != 2 || ps.Get(grp, netx.TCP) != tcp {
		t.Fatalf("%d pools after the reload, want the surviving group's two, the same", ps.Len())
	}
	if tcp.Initialized() || tcp.Projected() != d {
		t.Fatal("a surviving pool kept membership or lost demand")
	}
	wantCancel(t, tcp.Begin(pl), score.Uninitialized)
	if gone.Initialized() || ps.Get(other, netx.TCP) != nil {
		t.Fatal("a removed group's pool survived")
	}
}
