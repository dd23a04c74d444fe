package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// countingEcho is a loopback echo server counting the connections it
// accepted.
func countingEcho(t *testing.T) (spec.Outbound, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	addr := accept(t, func(c net.Conn) { n.Add(1); echo(c) })
	return spec.Outbound{Tag: "p", Type: "socks", Server: addr.String()}, &n
}

func echoes(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("hi")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 2)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "hi" {
		t.Fatalf("echo %q %v", b, err)
	}
}

// A flow's dial takes the pooled connection: no new connection at the
// server, the dial marked as a pool hit, and its admission permit taken
// for the protocol handshake that follows.
func TestAFlowTakesThePooledConnection(t *testing.T) {
	o, accepted := countingEcho(t)
	d := newDialer(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if opened, err := d.Warm(ctx, false); err != nil || !opened {
		t.Fatalf("warm: %v %v", opened, err)
	}
	if w := d.Warmth(); w.Kind != WarmPool || w.Pooled != 1 {
		t.Fatalf("warmth %+v", w)
	}
	adm := netx.NewAdmission(netx.NewGate(8), 4)
	e, dctx, dcancel := netx.Begin(context.Background(), adm, 5*time.Second)
	defer dcancel()
	c, err := d.Dial(dctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !e.TakePooled() {
		t.Fatal("the dial is not marked as a pool hit")
	}
	if s := adm.Stats(); s.InUse != 1 {
		t.Fatalf("a pool hit holds %d permits, want 1 (its handshake is admitted)", s.InUse)
	}
	e.End()
	echoes(t, c)
	if n := accepted.Load(); n != 1 {
		t.Fatalf("server accepted %d connections, want the pooled one", n)
	}
	if d.Warmth().Pooled != 0 {
		t.Fatal("the pooled connection is still listed")
	}
}

// A dial outside an establishment (a health probe) connects afresh and
// leaves the pooled connection for a flow.
func TestAProbeDialConnectsAfresh(t *testing.T) {
	o, accepted := countingEcho(t)
	d := newDialer(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Warm(ctx, false); err != nil {
		t.Fatal(err)
	}
	c, err := d.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoes(t, c)
	if n := accepted.Load(); n != 2 || d.Warmth().Pooled != 1 {
		t.Fatalf("accepted %d, pooled %d: the probe took the pooled connection", n, d.Warmth().Pooled)
	}
}

// A pool hit past a full admission gate waits for a permit within its
// deadline, like any handshake.
func TestAPoolHitWaitsForAdmission(t *testing.T) {
	o, _ := countingEcho(t)
	d := newDialer(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Warm(ctx, false); err != nil {
		t.Fatal(err)
	}
	adm := netx.NewAdmission(netx.NewGate(8), 1)
	holder, hctx, hcancel := netx.Begin(context.Background(), adm, time.Minute)
	defer hcancel()
	if err := netx.Admit(hctx); err != nil {
		t.Fatal(err)
	}
	defer holder.End()
	e, dctx, dcancel := netx.Begin(context.Background(), adm, 100*time.Millisecond)
	defer dcancel()
	_, err := d.Dial(dctx)
	e.End()
	if !errors.Is(err, context.DeadlineExceeded) || e.Phase() != netx.PhaseAdmission {
		t.Fatalf("a pool hit past a full gate: %v (phase %v)", err, e.Phase())
	}
}

// keep has the pool hold a connection until Cool; a seed is not kept.
func TestWarmKeepAndCool(t *testing.T) {
	o, accepted := countingEcho(t)
	d := newDialer(t, o)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if opened, err := d.Warm(ctx, true); err != nil || !opened {
		t.Fatalf("warm: %v %v", opened, err)
	}
	if opened, err := d.Warm(ctx, true); err != nil || opened {
		t.Fatalf("a second keep opened again: %v %v", opened, err)
	}
	// The server counts a connection once its accept returned, which may
	// follow the client's connect.
	for until := time.Now().Add(2 * time.Second); accepted.Load() < 1 && time.Now().Before(until); {
		time.Sleep(time.Millisecond)
	}
	if n := accepted.Load(); n != 1 || d.Warmth().Pooled != 1 {
		t.Fatalf("accepted %d, pooled %d", n, d.Warmth().Pooled)
	}
	d.Cool()
	if d.Warmth().Pooled != 0 {
		t.Fatal("Cool left the pool")
	}
}

// WebSocket and HTTP upgrade keep nothing between dials.
func TestStreamTransportsKeepNothingWarm(t *testing.T) {
	o := spec.Outbound{Tag: "w", Type: "vless", Server: "127.0.0.1:1", Transport: spec.Transport{Type: "ws", Path: "/"}}
	d := newDialer(t, o)
	if w := d.Warmth(); w.Kind != WarmNone {
		t.Fatalf("ws warmth %+v", w)
	}
	if _, err := d.Warm(context.Background(), true); !errors.Is(err, ErrNothingToWarm) {
		t.Fatalf("warm over ws: %v", err)
	}
}

// The pool's own replacement of a connection a flow took is a physical
// connect like a flow's: with the process gate full it waits for a
// permit, and connects once one is free.
func TestAPoolReplacementWaitsForTheProcessGate(t *testing.T) {
	o, accepted := countingEcho(t)
	opts := deps(nil)
	gate := netx.NewGate(1)
	opts.Dialer.Gate = gate
	d, err := New(o, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Warm(ctx, true); err != nil {
		t.Fatal(err)
	}
	// Another dial holds the gate's one permit.
	holder, hctx, hcancel := netx.Begin(context.Background(), netx.NewAdmission(gate, 1), time.Minute)
	defer hcancel()
	if err := netx.Admit(hctx); err != nil {
		t.Fatal(err)
	}
	// A flow, admitted elsewhere, takes the pooled connection.
	e, dctx, dcancel := netx.Begin(context.Background(), netx.NewAdmission(netx.NewGate(8), 4), 5*time.Second)
	defer dcancel()
	c, err := d.Dial(dctx)
	e.End()
	if err != nil || !e.TakePooled() {
		t.Fatalf("the flow's dial: %v, pooled %v", err, e.TakePooled())
	}
	defer c.Close()
	time.Sleep(300 * time.Millisecond)
	if n := accepted.Load(); n != 1 || d.Warmth().Pooled != 0 {
		t.Fatalf("with the gate full the replacement connected: %d accepted, %d pooled", n, d.Warmth().Pooled)
	}
	holder.End()
	for deadline := time.Now().Add(5 * time.Second); d.Warmth().Pooled != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no replacement once the gate freed: %+v", d.Warmth())
		}
	}
}

// A TLS stream over the tcp transport is pooled and then taken by a flow,
// the one a Vision flow may step down from (Beneath) included: the pool
// probes its socket beneath the TLS layer.
func TestTLSStreamsArePooled(t *testing.T) {
	p := newPKI(t)
	var accepted atomic.Int32
	server := accept(t, func(c net.Conn) {
		accepted.Add(1)
		tc := tls.Server(c, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
		if tc.Handshake() == nil {
			echo(tc)
		}
	})
	for _, beneath := range []bool{false, true} {
		accepted.Store(0)
		opts := deps(nil)
		opts.Beneath = beneath
		d, err := New(spec.Outbound{Tag: "p", Type: "vless", Server: server.String(), TLS: &spec.TLS{ServerName: serverName, CAFile: p.caFile}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if opened, err := d.Warm(ctx, false); err != nil || !opened {
			t.Fatalf("beneath %v: warm: %v %v", beneath, opened, err)
		}
		if w := d.Warmth(); w.Pooled != 1 {
			t.Fatalf("beneath %v: %d pooled, want the TLS stream", beneath, w.Pooled)
		}
		adm := netx.NewAdmission(netx.NewGate(8), 4)
		e, dctx, dcancel := netx.Begin(ctx, adm, 5*time.Second)
		c, err := d.Dial(dctx)
		if err != nil {
			t.Fatal(err)
		}
		if !e.TakePooled() {
			t.Fatalf("beneath %v: the dial is not a pool hit", beneath)
		}
		e.End()
		if _, ok := c.(*TLSStream); !ok {
			t.Fatalf("beneath %v: a %T", beneath, c)
		}
		echoes(t, c)
		if n := accepted.Load(); n != 1 {
			t.Fatalf("beneath %v: the server accepted %d connections, want the pooled one", beneath, n)
		}
		c.Close()
		dcancel()
		cancel()
		d.Close()
	}
}
