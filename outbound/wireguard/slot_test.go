package wireguard

import (
	"context"
	"errors"
	"testing"
	"time"

	"switchyard/internal/slot"
	"switchyard/netx"
)

// A start that keeps failing is retried 2, 4, 8, 16 and then every 30 s
// after the previous failure, and dials in between fail at once without
// touching the network.
func TestFailedStartsBackOff(t *testing.T) {
	keys := newKeyPair(t)
	o := clientSpec(nil, keys)
	o.Endpoint = "gone.test:51820"
	c := newClient(t, o)
	clk := newClock()
	c.now = clk.Now
	dial := func() error {
		_, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
		return err
	}
	for i, wait := range []time.Duration{2, 4, 8, 16, 30, 30, 30} {
		if err := dial(); !errors.Is(err, ErrEndpointNotResolved) {
			t.Fatalf("attempt %d: %v", i+1, err)
		}
		if c.servers.count() != i+1 {
			t.Fatalf("attempt %d: %d lookups", i+1, c.servers.count())
		}
		clk.Advance(wait*time.Second - time.Millisecond)
		if err := dial(); !errors.Is(err, ErrTunnelDown) || err.Error() != "wireguard: tunnel is down, waiting before the next attempt" {
			t.Fatalf("%v after failure %d: %v", wait*time.Second-time.Millisecond, i+1, err)
		}
		if c.servers.count() != i+1 {
			t.Fatalf("a dial during the backoff started the tunnel")
		}
		if st, _ := c.SlotState(); st.Phase != slot.Backoff || st.Failures != i+1 || !errors.Is(st.LastErr, ErrEndpointNotResolved) {
			t.Fatalf("state after failure %d: %+v", i+1, st)
		}
		clk.Advance(time.Millisecond)
	}
	if n := c.logs.count("wireguard: tunnel start failed: wireguard: endpoint domain did not resolve"); n != 7 {
		t.Fatalf("%d start-failure lines:\n%s", n, c.logs)
	}
	// A start that succeeds ends the wait for good.
	c.servers.answers["gone.test"] = c.servers.answers["peer.test"]
	if err := dial(); err != nil {
		t.Fatal(err)
	}
}

// A cancelled dial is not a failure of the tunnel.
func TestACancelledStartIsNoFailure(t *testing.T) {
	keys := newKeyPair(t)
	c := newClient(t, clientSpec(nil, keys))
	clk := newClock()
	c.now = clk.Now
	c.servers.err = context.Canceled
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.DialStream(ctx, netx.Flow{Dst: mustAddr("10.7.0.1:7")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled dial: %v", err)
	}
	c.servers.err = nil
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatalf("dial after a cancelled one: %v", err)
	}
	l.Close()
}

// tunnelOf returns the slot's current tunnel.
func tunnelOf(c *client) *tunnel {
	r, ok := c.tunnels.slot.Current()
	if !ok {
		return nil
	}
	return r.V
}

func waitDead(t *testing.T, tun *tunnel) {
	t.Helper()
	select {
	case <-tun.dead:
	case <-time.After(5 * time.Second):
		t.Fatal("the tunnel did not stop")
	}
}

// A tunnel that dies within 10 s of its start counts as a failure and is
// rebuilt after the backoff; one that ran longer is rebuilt at once and
// clears the count.
func TestADeadTunnelIsRebuilt(t *testing.T) {
	_, c := pair(t, "", nil)
	clk := newClock()
	c.now = clk.Now
	echo := func() error {
		conn, err := c.DialStream(context.Background(), netx.Flow{Dst: mustAddr("10.7.0.1:7")})
		if err == nil {
			echoOnce(t, conn, []byte("hello"))
			conn.Close()
		}
		return err
	}
	if err := echo(); err != nil {
		t.Fatal(err)
	}
	first := tunnelOf(c)
	clk.Advance(5 * time.Second)
	first.dev.Close() // the driver stops 5 s after the start
	waitDead(t, first)
	if err := echo(); !errors.Is(err, ErrTunnelDown) {
		t.Fatalf("dial after a short-lived tunnel: %v", err)
	}
	if n := c.logs.countSoon("wireguard: tunnel driver stopped, rebuilding", 1); n != 1 {
		t.Fatalf("%d driver-stopped lines", n)
	}
	clk.Advance(2*time.Second - time.Millisecond)
	if err := echo(); !errors.Is(err, ErrTunnelDown) {
		t.Fatalf("dial just before the 2 s backoff ends: %v", err)
	}
	clk.Advance(time.Millisecond)
	if err := echo(); err != nil {
		t.Fatalf("rebuild after the backoff: %v", err)
	}
	second := tunnelOf(c)
	if second == first {
		t.Fatal("the dead tunnel was kept")
	}

	// Its socket fails 15 s later: a healthy lifetime, so the next dial
	// rebuilds at once.
	clk.Advance(15 * time.Second)
	s := second.bind.sock.Load()
	(*s).Close()
	waitDead(t, second)
	if err := echo(); err != nil {
		t.Fatalf("rebuild after a healthy tunnel: %v", err)
	}
	if tunnelOf(c) == second {
		t.Fatal("the tunnel with a failed socket was kept")
	}
	if n := c.logs.countSoon("wireguard: tunnel driver stopped, rebuilding", 2); n != 2 {
		t.Fatalf("%d driver-stopped lines", n)
	}
	if got := c.socks.networks(); len(got) != 3 {
		t.Fatalf("hooked sockets for three tunnels: %v", got)
	}
}

// Concurrent first dials share one start.
func TestConcurrentDialsShareOneStart(t *testing.T) {
	keys := newKeyPair(t)
	c := newClient(t, clientSpec(nil, keys))
	clk := newClock()
	c.now = clk.Now
	release := make(chan struct{})
	c.servers.mu.Lock() // the first start blocks in its lookup
	go func() { <-release; c.servers.mu.Unlock() }()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
			if err == nil {
				l.Close()
			}
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := c.servers.count(); n != 1 {
		t.Fatalf("%d starts", n)
	}
	// A waiter whose context ends while a start runs gives up alone.
	dead := tunnelOf(c)
	dead.dev.Close()
	waitDead(t, dead)
	for tunnelOf(c) != nil { // the slot retires it, by the clock of its death
		time.Sleep(time.Millisecond)
	}
	clk.Advance(2 * time.Second) // past the backoff of a short-lived tunnel
	c.servers.mu.Lock()
	started := make(chan error, 1)
	go func() {
		l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
		if err == nil {
			l.Close()
		}
		started <- err
	}()
	for deadline := time.Now().Add(5 * time.Second); ; {
		running := c.tunnels.slot.State().Phase == slot.Establishing
		if running {
			break
		}
		if time.Now().After(deadline) {
			c.servers.mu.Unlock()
			t.Fatalf("no start began: %v", <-started)
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.DialPacket(ctx, netx.Flow{Network: netx.UDP}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiter with an ended context: %v", err)
	}
	c.servers.mu.Unlock()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
}
