package transport

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/internal/slot"
	"switchyard/spec"
)

// waitUntil polls cond until it holds, failing the test after 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// After Purge the next stream opens a new HTTP/2 connection; a stream open
// on the old one keeps working, and the old connection closes once that
// stream ends.
func TestGRPCPurgeDrainsTheConnection(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	old := dialCtx(t, d)
	defer old.Close()
	echoRoundTrip(t, old, 10)

	d.Purge()
	fresh := dialCtx(t, d)
	defer fresh.Close()
	echoRoundTrip(t, fresh, 10)
	if n := srv.accepts.Load(); n != 2 {
		t.Fatalf("%d connections after a purge, want 2", n)
	}
	// The purged connection still carries its stream, both ways.
	echoRoundTrip(t, old, 100, 70_000)
	if n := srv.ended.Load(); n != 0 {
		t.Fatalf("%d connections ended while both had a stream", n)
	}
	// Another stream goes to the new connection, not the purged one.
	again := dialCtx(t, d)
	echoRoundTrip(t, again, 5)
	again.Close()
	if n := srv.accepts.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}

	old.Close()
	waitUntil(t, "the purged connection to close", func() bool { return srv.ended.Load() == 1 })
	echoRoundTrip(t, fresh, 10)
}

// A purged connection with no stream open closes at once.
func TestGRPCPurgeIdleConnection(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	c := dialCtx(t, d)
	echoRoundTrip(t, c, 10)
	c.Close()
	d.Purge()
	waitUntil(t, "the idle purged connection to close", func() bool { return srv.ended.Load() == 1 })
	c = dialCtx(t, d)
	echoRoundTrip(t, c, 10)
	c.Close()
	if n := srv.accepts.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
	d.Purge() // twice in a row, and on a dialer of no pool: nothing breaks
	d.Purge()
	newDialer(t, spec.Outbound{Server: srv.addr.String()}).Purge()
}

// Purge races dials and stream ends: every dial that succeeds carries its
// stream, and every connection ends once the dialer is closed.
func TestGRPCPurgeConcurrentWithDials(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	stop := make(chan struct{})
	var purger sync.WaitGroup
	purger.Add(1)
	go func() {
		defer purger.Done()
		for {
			select {
			case <-stop:
				return
			default:
				d.Purge()
				time.Sleep(time.Millisecond)
			}
		}
	}()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c, err := d.Dial(ctx)
				cancel()
				if err != nil {
					t.Errorf("dial: %v", err)
					return
				}
				echoRoundTrip(t, c, 10, 1000)
				c.Close()
			}
		}()
	}
	wg.Wait()
	close(stop)
	purger.Wait()
	d.Close()
	waitUntil(t, "every connection to end", func() bool { return srv.ended.Load() == srv.accepts.Load() })
}

// A failed connect backs off (internal/slot's policy): the next dial fails
// at once, without touching the server, naming the wait.
func TestGRPCFailedConnectBacksOff(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, nil, grpcEcho(false, "0")) // no h2: every connect fails
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Dial(ctx); err == nil || errors.Is(err, slot.ErrBackoff) {
		t.Fatalf("first dial: %v", err)
	}
	_, err := d.Dial(ctx)
	if !errors.Is(err, slot.ErrBackoff) || !strings.Contains(err.Error(), "grpc: the connection to "+srv.addr.String()+" is down") {
		t.Fatalf("dial during the backoff: %v", err)
	}
	if n := srv.accepts.Load(); n != 1 {
		t.Fatalf("%d connections, want 1: the dial during the backoff connected", n)
	}
	if st, ok := d.SlotState(); !ok || st.Phase != slot.Backoff || st.Failures != 1 || st.LastErr == nil {
		t.Fatalf("state %+v", st)
	}
}
