package transport

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// A flow on the HTTP/2 connection already up is a logical open: it passes
// a full admission gate, while a dial that needs a new connection waits
// for the gate within its deadline.
func TestXHTTPFlowsOnAnEstablishedConnectionPassAFullGate(t *testing.T) {
	s := newXHServer(t, nil)
	o := xhOutbound(s.addr, spec.Transport{Mode: "stream-up"}, nil)
	d := newDialer(t, o)
	adm := netx.NewAdmission(netx.NewGate(8), 1)

	e, ctx, cancel := netx.Begin(context.Background(), adm, 5*time.Second)
	first, err := d.Dial(ctx)
	e.End()
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	holder, hctx, hcancel := netx.Begin(context.Background(), adm, time.Minute)
	defer hcancel()
	if err := netx.Admit(hctx); err != nil {
		t.Fatal(err)
	}
	defer holder.End()

	e, ctx, cancel = netx.Begin(context.Background(), adm, 2*time.Second)
	defer cancel()
	c, err := d.Dial(ctx)
	e.End()
	if err != nil {
		t.Fatalf("a flow on the live connection waited for the full gate: %v", err)
	}
	defer c.Close()
	xhEcho(t, c, 1000, 1000)
	if st := adm.Stats(); st.InUse != 1 || st.Waiting != 0 {
		t.Fatalf("admission %+v after a logical open", st)
	}

	fresh := newDialer(t, o)
	e, ctx, cancel = netx.Begin(context.Background(), adm, 200*time.Millisecond)
	defer cancel()
	_, err = fresh.Dial(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || e.Phase() != netx.PhaseAdmission {
		t.Fatalf("a new connection past a full gate: %v (phase %v)", err, e.Phase())
	}
}

// Purge lets the shared connection go: the flow on it carries on, the next
// flow connects afresh; Warm brings the connection up before any flow.
func TestXHTTPPurgeAndWarm(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one"}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if opened, err := d.Warm(ctx, false); err != nil || !opened {
		t.Fatalf("Warm: %v, %v", opened, err)
	}
	if w := d.Warmth(); w.Kind != WarmSession || !w.Up {
		t.Fatalf("warmth %+v after Warm", w)
	}
	old := dialCtx(t, d)
	defer old.Close()
	xhEcho(t, old, 1000, 1000)
	if n := s.accepts.Load(); n != 1 {
		t.Fatalf("%d connections after Warm and a flow, want 1", n)
	}
	d.Purge()
	fresh := dialCtx(t, d)
	defer fresh.Close()
	xhEcho(t, fresh, 1000, 1000)
	xhEcho(t, old, 100_000, 10_000)
	if n := s.accepts.Load(); n != 2 {
		t.Fatalf("%d connections after a purge, want 2", n)
	}
}

// Every socket of a flow, the packet-up upload connection over HTTP/1.1
// included, is opened under the socket policy.
func TestXHTTPSocketsUnderThePolicy(t *testing.T) {
	s := newXHServer(t, nil)
	var sockets atomic.Int32
	opts := deps(func(netx.SocketInfo) error { sockets.Add(1); return nil })
	d, err := New(xhOutbound(s.addr, spec.Transport{Mode: "packet-up", MinPostsInterval: time.Millisecond}, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := dialCtx(t, d)
	xhEcho(t, c, 50_000, 5000)
	c.Close()
	if n, accepted := sockets.Load(), s.accepts.Load(); n != accepted || n != 2 {
		t.Fatalf("%d sockets under the policy, %d accepted by the server; want 2 of each (download and upload)", n, accepted)
	}
}
