package slot

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/netx"
)

// Users sharing one establishment that fails share one failure: the same
// episode, under netx.FaultSharedDial or the fault the failure names; the
// next establishment's failure is another episode.
func TestASharedEstablishmentFailsItsUsersWithOneEpisode(t *testing.T) {
	h := newHarness(t, nil)
	refused := errors.New("refused")
	outs := []chan acquired{h.acquireAsync(context.Background()), h.acquireAsync(context.Background())}
	c := h.est.next(t)
	waitFor(t, "establishing", func() bool { return h.s.State().Phase == Establishing })
	time.Sleep(20 * time.Millisecond) // let the other reach the slot
	c.fail(refused)
	var eps []uint64
	for _, o := range outs {
		a := recv(t, o)
		f, ep := netx.FaultOf(a.err)
		if !errors.Is(a.err, refused) || f != netx.FaultSharedDial || ep == 0 {
			t.Fatalf("a user of the failed establishment: %v (fault %v, episode %d)", a.err, f, ep)
		}
		eps = append(eps, ep)
	}
	if eps[0] != eps[1] {
		t.Fatalf("episodes %v for one failure", eps)
	}
	if st := h.s.State(); st.LastErr != refused {
		t.Fatalf("the state's last error %v", st.LastErr)
	}
	h.clk.Advance(time.Minute)
	out := h.acquireAsync(context.Background())
	h.est.next(t).fail(netx.WithFault(errors.New("bad password"), netx.FaultProxyAuth))
	a := recv(t, out)
	if f, ep := netx.FaultOf(a.err); f != netx.FaultProxyAuth || ep == 0 || ep == eps[0] {
		t.Fatalf("the next failure: %v (fault %v, episode %d)", a.err, f, ep)
	}
}
