package hysteria2

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/slot"
	"switchyard/netx"
)

func TestConcurrentFirstDialsShareOneConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	gate := make(chan struct{})
	h.sockets.gate = gate // the attempt waits until every dial is waiting on it
	o := h.outbound(testSpec(srv.addr, srv.cert))
	echo := tcpEcho(t)
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := o.DialStream(context.Background(), netx.Flow{Dst: echo})
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			echoOnce(t, c, "concurrent")
		}()
	}
	waitFor(t, "the connect attempt", func() bool { return h.sockets.count() == 1 })
	time.Sleep(50 * time.Millisecond) // let the other dials reach the slot
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := h.sockets.count(); got != 1 {
		t.Fatalf("%d concurrent first dials opened %d sockets, want 1", n, got)
	}
	if got := srv.sessions.Load(); got != 1 {
		t.Fatalf("%d concurrent first dials made %d server sessions, want 1", n, got)
	}
}

func TestACancelledDialLeavesTheAttemptRunning(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	gate := make(chan struct{})
	h.sockets.gate = gate
	o := h.outbound(testSpec(srv.addr, srv.cert))
	echo := tcpEcho(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := o.DialStream(ctx, netx.Flow{Dst: echo})
		done <- err
	}()
	waitFor(t, "the connect attempt", func() bool { return h.sockets.count() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled dial: %v", err)
	}
	close(gate) // the attempt goes on with no one waiting
	waitFor(t, "the connection", func() bool { st, _ := snapshot(o); return st == slot.Up })
	dialEcho(t, o, echo)
	if got := srv.sessions.Load(); got != 1 {
		t.Fatalf("%d server sessions, want 1: the abandoned attempt's connection was not kept", got)
	}
}

func TestAShortLivedConnectionDrivesTheBackoff(t *testing.T) {
	srv := startCloser(t, 50*time.Millisecond)
	h := newHarness(t)
	clk := newManualClock()
	h.clock = clk
	o := h.outbound(testSpec(srv.addr, srv.cert))
	ctx := context.Background()

	up := func(sessions int32) {
		t.Helper()
		r, err := o.slot.Acquire(ctx)
		if err != nil {
			t.Fatalf("dial after the backoff: %v", err)
		}
		r.Release()
		if got := srv.sessions.Load(); got != sessions {
			t.Fatalf("%d server sessions, want %d", got, sessions)
		}
		waitFor(t, "the server to close the connection", func() bool { return down(o) })
	}
	down := func() {
		t.Helper()
		_, err := o.slot.Acquire(ctx)
		if !errors.Is(err, errBackoff) || err.Error() != "hysteria2: connection is down, waiting before the next attempt" {
			t.Fatalf("dial during the backoff: %v", err)
		}
	}
	up(1)
	for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second} {
		down()
		clk.Advance(wait - time.Millisecond)
		down()
		clk.Advance(time.Millisecond)
		up(int32(i + 2))
	}
	if _, failures := snapshot(o); failures != 4 {
		t.Fatalf("failures = %d, want 4", failures)
	}
	if n := h.logs.count("hysteria2: connection closed, reconnecting"); n != 4 {
		t.Fatalf("%d 'connection closed' warnings, want 4:\n%s", n, h.logs)
	}
	if !strings.Contains(h.logs.String(), "level=WARN") {
		t.Fatalf("the warnings are not at warn level:\n%s", h.logs)
	}
}

func TestALongLivedConnectionReconnectsAtOnce(t *testing.T) {
	srv := startCloser(t, 0)
	h := newHarness(t)
	clk := newManualClock()
	h.clock = clk
	o := h.outbound(testSpec(srv.addr, srv.cert))
	r, err := o.slot.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	r.Release()
	clk.Advance(slot.DefaultPolicy.MinHealthy)
	srv.closeAll()
	waitFor(t, "the connection to be retired", func() bool { return down(o) })
	r, err = o.slot.Acquire(context.Background())
	if err != nil {
		t.Fatalf("the dial after a connection that lived %s: %v", slot.DefaultPolicy.MinHealthy, err)
	}
	r.Release()
	if got := srv.sessions.Load(); got != 2 {
		t.Fatalf("%d server sessions, want 2", got)
	}
	if _, failures := snapshot(o); failures != 0 {
		t.Fatalf("failures = %d after a healthy connection", failures)
	}
}

func TestAFailedAttemptIsLoggedAndBacksOff(t *testing.T) {
	h := newHarness(t)
	clk := newManualClock()
	h.clock = clk
	refuse := errors.New("the platform refused the socket")
	h.sockets.refuse = refuse
	srv := startServer(t, serverOptions{})
	o := h.outbound(testSpec(srv.addr, srv.cert))
	flow := netx.Flow{Dst: netx.DomainAddr("example.com", 80)}

	_, err := o.DialStream(context.Background(), flow)
	if !errors.Is(err, refuse) {
		t.Fatalf("refusing hook: %v", err)
	}
	want := "hysteria2: no address answered (" + srv.addr.String() + ": "
	if !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("error = %q, want prefix %q", err, want)
	}
	if n := h.logs.count("hysteria2: connect failed: " + want); n != 1 {
		t.Fatalf("connect failed logged %d times:\n%s", n, h.logs)
	}
	if _, err := o.DialStream(context.Background(), flow); !errors.Is(err, errBackoff) {
		t.Fatalf("second dial: %v", err)
	}
	clk.Advance(2*time.Second - time.Millisecond)
	if _, err := o.DialStream(context.Background(), flow); !errors.Is(err, errBackoff) {
		t.Fatalf("dial just before the first 2s backoff ends: %v", err)
	}
	clk.Advance(time.Millisecond)
	if _, err := o.DialStream(context.Background(), flow); !errors.Is(err, refuse) {
		t.Fatalf("dial after 2s: %v", err)
	}
	clk.Advance(2 * time.Second)
	if _, err := o.DialStream(context.Background(), flow); !errors.Is(err, errBackoff) {
		t.Fatalf("dial 2s into a 4s backoff: %v", err)
	}
	if n := h.sockets.count(); n != 2 {
		t.Fatalf("%d sockets tried, want 2", n)
	}
	if srv.sessions.Load() != 0 {
		t.Fatal("a refused socket reached the server")
	}
}

func TestTheQUICSocketIsHooked(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	dialEcho(t, h.outbound(testSpec(srv.addr, srv.cert)), tcpEcho(t))
	h.sockets.mu.Lock()
	defer h.sockets.mu.Unlock()
	if len(h.sockets.seen) != 1 || h.sockets.seen[0].Network != "udp4" || h.sockets.seen[0].FD == 0 {
		t.Fatalf("hooked sockets: %+v, want one udp4 socket", h.sockets.seen)
	}
}

func TestCloseEndsAnAttemptInFlight(t *testing.T) {
	h := newHarness(t)
	// An address that never answers: the attempt would wait for its timeout.
	o := h.outbound(testSpec(blackhole(t), testCert{}))
	done := make(chan error, 1)
	go func() {
		_, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 80)})
		done <- err
	}()
	waitFor(t, "the connect attempt", func() bool { return h.sockets.count() == 1 })
	start := time.Now()
	o.Close()
	if err := <-done; !errors.Is(err, errClosed) {
		t.Fatalf("dial waiting on a closed outbound: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %s", d)
	}
}
