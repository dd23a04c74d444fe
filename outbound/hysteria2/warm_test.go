package hysteria2

import (
	"context"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
)

// Warm brings the QUIC connection up without a flow; the first flow then
// rides it (no second session); Cool lets an unused one go, and keeps
// one a flow uses.
func TestWarmBringsTheConnectionUp(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	if w := o.Warmth(); w.Kind != outbound.WarmSession || w.Up {
		t.Fatalf("before: %+v", w)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if opened, err := o.Warm(ctx, true); err != nil || !opened {
		t.Fatalf("warm: %v %v", opened, err)
	}
	if opened, err := o.Warm(ctx, true); err != nil || opened {
		t.Fatalf("a second warm opened again: %v %v", opened, err)
	}
	if !o.Warmth().Up || srv.sessions.Load() != 1 {
		t.Fatalf("warmth %+v, %d sessions", o.Warmth(), srv.sessions.Load())
	}
	echo := tcpEcho(t)
	c, err := o.DialStream(ctx, netx.Flow{Network: netx.TCP, Dst: echo})
	if err != nil {
		t.Fatal(err)
	}
	echoOnce(t, c, "on the warm connection")
	if n := srv.sessions.Load(); n != 1 {
		t.Fatalf("%d sessions: the flow did not ride the warm connection", n)
	}
	o.Cool() // a stream is open: kept
	if !o.Warmth().Up {
		t.Fatal("Cool retired a connection a flow uses")
	}
	echoOnce(t, c, "still there")
	c.Close()
	waitFor(t, "the stream's release", func() bool { st, _ := o.SlotState(); return st.Holds == 0 })
	o.Cool()
	waitFor(t, "the idle connection let go", func() bool { return !o.Warmth().Up })
}
