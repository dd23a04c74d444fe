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

// A flow on an idle connection makes no connect, but its requests are its
// handshake: it takes the dial's admission permit, waiting for a full gate
// within its deadline, and counts as a pooled dial.
func TestXHTTPIdleConnectionTakesThePermit(t *testing.T) {
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
	xhEcho(t, first, 1000, 1000)
	first.Close()

	holder, hctx, hcancel := netx.Begin(context.Background(), adm, time.Minute)
	if err := netx.Admit(hctx); err != nil {
		t.Fatal(err)
	}
	e, ctx, cancel = netx.Begin(context.Background(), adm, 200*time.Millisecond)
	_, err = d.Dial(ctx)
	e.End()
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || e.Phase() != netx.PhaseAdmission {
		t.Fatalf("a flow on an idle connection past a full gate: %v (phase %v)", err, e.Phase())
	}
	holder.End()
	hcancel()

	e, ctx, cancel = netx.Begin(context.Background(), adm, 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx)
	pooled := e.TakePooled()
	e.End()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	xhEcho(t, c, 1000, 1000)
	if !pooled {
		t.Error("a flow on an idle connection is not marked pooled")
	}
	if n := s.accepts.Load(); n != 1 {
		t.Fatalf("%d connections, want the one reused", n)
	}
}

// Warm opens a connection before any flow, which the first flow takes.
func TestXHTTPWarm(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one"}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if opened, err := d.Warm(ctx, false); err != nil || !opened {
		t.Fatalf("Warm: %v, %v", opened, err)
	}
	if w := d.Warmth(); w.Kind != WarmPool || w.Pooled != 1 {
		t.Fatalf("warmth %+v after Warm", w)
	}
	if opened, err := d.Warm(ctx, true); err != nil || opened {
		t.Fatalf("a second Warm with one connection idle: %v, %v", opened, err)
	}
	c := xhFlow(t, d)
	defer c.Close()
	xhEcho(t, c, 1000, 1000)
	if n := s.accepts.Load(); n != 1 {
		t.Fatalf("%d connections after Warm and a flow, want 1", n)
	}
	if w := d.Warmth(); w.Pooled != 0 {
		t.Fatal("the warm connection is still idle while the flow holds it")
	}
	d.Cool()
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

// An idle connection that broke meanwhile does not fail the next flow: the
// dial goes on to a fresh connection.
func TestXHTTPBrokenIdleConnection(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one"}, nil))
	c := xhFlow(t, d)
	xhEcho(t, c, 1000, 1000)
	c.Close()
	d.xhttp.mu.Lock()
	if len(d.xhttp.idle) != 1 {
		d.xhttp.mu.Unlock()
		t.Fatalf("%d idle connections after a flow, want 1", len(d.xhttp.idle))
	}
	d.xhttp.idle[0].raw.Close()
	d.xhttp.mu.Unlock()
	c = xhFlow(t, d)
	defer c.Close()
	xhEcho(t, c, 1000, 1000)
	if n := s.accepts.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the broken one and a fresh one)", n)
	}
}
