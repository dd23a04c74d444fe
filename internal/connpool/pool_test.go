package connpool

import (
	"context"
	"net"
	"testing"
	"time"
)

func newPool(t *testing.T, cfg Config) *Pool {
	p := New(cfg)
	t.Cleanup(p.Close)
	return p
}

// A pooled connection the server closed (FIN) or reset (RST) is never
// handed to a flow: the flow gets a fresh connection, which works.
func TestAConnectionTheServerClosedIsNeverHandedOut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tls   bool
		reset bool
	}{
		{"fin", false, false},
		{"rst", false, true},
		{"tls fin", true, false},
		{"tls rst", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.tls)
			p := newPool(t, Config{Dial: srv.dial})
			ctx := context.Background()
			if err := p.Fill(ctx, 1); err != nil {
				t.Fatal(err)
			}
			sc := srv.conn(t, 0)
			if tc.reset {
				raw := sc
				if l, ok := sc.(interface{ NetConn() net.Conn }); ok {
					raw = l.NetConn()
				}
				raw.(*net.TCPConn).SetLinger(0)
			}
			sc.Close()
			time.Sleep(50 * time.Millisecond) // the FIN or RST reaches the client
			c, fromPool, err := p.Get(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if fromPool {
				t.Fatal("a connection the server closed was handed out")
			}
			roundTrip(t, c)
			if st := p.Stats(); st.Dead != 1 || st.Misses != 1 || st.Hits != 0 || srv.accepts.Load() != 2 {
				t.Fatalf("stats %+v, %d accepts", st, srv.accepts.Load())
			}
		})
	}
}

// A live pooled connection is handed out and carries the flow; the
// youngest goes first.
func TestALivePooledConnectionIsHandedOut(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		srv := newServer(t, withTLS)
		p := newPool(t, Config{Dial: srv.dial})
		ctx := context.Background()
		if err := p.Fill(ctx, 2); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // a TLS 1.3 server's session tickets arrive
		c, fromPool, err := p.Get(ctx)
		if err != nil || !fromPool {
			t.Fatalf("tls %v: Get: %v, from the pool %v", withTLS, err, fromPool)
		}
		roundTrip(t, c)
		c.Close()
		if st := p.Stats(); st.Hits != 1 || st.Idle != 1 || st.Deposited != 2 || st.Misses != 0 {
			t.Fatalf("tls %v: stats %+v", withTLS, st)
		}
	}
}

// Bytes waiting on a bare connection mean the server spoke first: a flow
// would read them as its answer, so the connection is discarded.
func TestABareConnectionWithBytesWaitingIsDiscarded(t *testing.T) {
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial})
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.conn(t, 0).Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	c, fromPool, err := p.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if fromPool || p.Stats().Dead != 1 {
		t.Fatalf("from the pool %v, stats %+v", fromPool, p.Stats())
	}
}

// A connection as old as Idle is closed, not handed out.
func TestAnExpiredConnectionIsNotHandedOut(t *testing.T) {
	srv := newServer(t, false)
	clk := newClock()
	p := newPool(t, Config{Dial: srv.dial, Now: clk.Now, Idle: time.Hour})
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour - time.Millisecond)
	c, fromPool, err := p.Get(context.Background())
	if err != nil || !fromPool {
		t.Fatalf("just before Idle: %v, from the pool %v", err, fromPool)
	}
	c.Close()
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	c, fromPool, err = p.Get(context.Background())
	if err != nil || fromPool {
		t.Fatalf("at Idle: %v, from the pool %v", err, fromPool)
	}
	c.Close()
	if st := p.Stats(); st.Expired != 1 {
		t.Fatalf("stats %+v", st)
	}
	waitFor(t, "the server to see the expired connection closed", func() bool { return srv.eofs.Load() >= 2 })
}

// The pool holds at most Size; a deposit beyond is closed.
func TestThePoolIsBounded(t *testing.T) {
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial})
	if err := p.Fill(context.Background(), 10); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Idle != DefaultSize || st.Deposited != DefaultSize {
		t.Fatalf("Fill(10): stats %+v", st)
	}
	extra, err := srv.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if p.Put(extra) {
		t.Fatal("a full pool took a deposit")
	}
	waitFor(t, "the refused deposit to be closed", func() bool { return srv.eofs.Load() == 1 })
}

// The idle timer closes expired connections by itself, and its goroutine
// ends with the pool empty.
func TestExpiredConnectionsAreClosedByThePool(t *testing.T) {
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Idle: 50 * time.Millisecond})
	if err := p.Fill(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "both expired connections closed", func() bool { return srv.eofs.Load() == 2 })
	if st := p.Stats(); st.Idle != 0 || st.Expired != 2 {
		t.Fatalf("stats %+v", st)
	}
	waitFor(t, "the reaper to end", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return !p.reaping })
}

// With Refresh an expired connection is replaced, keeping the level the
// last Fill set, until Purge.
func TestRefreshKeepsTheLevelUntilPurge(t *testing.T) {
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Idle: 30 * time.Millisecond, Refresh: true})
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three replacements", func() bool { return p.Stats().Deposited >= 4 })
	if st := p.Stats(); st.Idle != 1 {
		t.Fatalf("stats %+v", st)
	}
	p.Purge()
	time.Sleep(20 * time.Millisecond)
	n := p.Stats().Deposited
	time.Sleep(100 * time.Millisecond)
	if st := p.Stats(); st.Deposited != n || st.Idle != 0 {
		t.Fatalf("the refresh went on after Purge: %+v", st)
	}
}

// Purge closes every pooled connection; Close too, and refuses deposits.
func TestPurgeAndClose(t *testing.T) {
	srv := newServer(t, false)
	p := New(Config{Dial: srv.dial})
	if err := p.Fill(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	p.Purge()
	waitFor(t, "the purged connections to close", func() bool { return srv.eofs.Load() == 2 })
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	waitFor(t, "Close to close the pooled connection", func() bool { return srv.eofs.Load() == 3 })
	if err := p.Fill(context.Background(), 1); err != ErrClosed {
		t.Fatalf("Fill after Close: %v", err)
	}
	c, fromPool, err := p.Get(context.Background()) // Get still dials
	if err != nil || fromPool {
		t.Fatalf("Get after Close: %v, %v", err, fromPool)
	}
	c.Close()
}

// Fill does not count a pooled connection the server closed: it is
// discarded and a live one dialed in its place.
func TestFillReplacesAConnectionTheServerClosed(t *testing.T) {
	for _, withTLS := range []bool{false, true} {
		srv := newServer(t, withTLS)
		p := newPool(t, Config{Dial: srv.dial, Refresh: true})
		ctx := context.Background()
		if err := p.Fill(ctx, 1); err != nil {
			t.Fatal(err)
		}
		srv.conn(t, 0).Close()
		time.Sleep(50 * time.Millisecond) // the FIN reaches the client
		if err := p.Fill(ctx, 1); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the second accept", func() bool { return srv.accepts.Load() == 2 })
		if st := p.Stats(); st.Idle != 1 || st.Dead != 1 {
			t.Fatalf("tls %v: stats %+v", withTLS, st)
		}
		// A live one is kept, not redialed.
		if err := p.Fill(ctx, 1); err != nil || srv.accepts.Load() != 2 {
			t.Fatalf("tls %v: a live pooled connection was redialed (%d accepts, %v)", withTLS, srv.accepts.Load(), err)
		}
		c, fromPool, err := p.Get(ctx)
		if err != nil || !fromPool {
			t.Fatalf("tls %v: the replacement was not handed out: %v %v", withTLS, fromPool, err)
		}
		roundTrip(t, c)
		c.Close()
	}
}

// A kept pool replaces the connection a flow took at once, not at the
// reaper's pace: the next new flow finds one too. A pool that only got a
// deposit (no level) replaces nothing.
func TestAKeptPoolReplacesWhatAFlowTook(t *testing.T) {
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true})
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		c, fromPool, err := p.Get(context.Background())
		if err != nil || !fromPool {
			t.Fatalf("flow %d: from the pool %v, %v", i, fromPool, err)
		}
		c.Close()
		// Well inside the 3 s pacing of expiry replacements.
		for deadline := time.Now().Add(time.Second); p.Stats().Idle != 1; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("flow %d: the connection taken is not replaced within 1 s: %+v", i, p.Stats())
			}
		}
	}
	if n := srv.accepts.Load(); n != 4 {
		t.Fatalf("the server accepted %d connections, want 4 (the fill and one per flow)", n)
	}

	seed := newPool(t, Config{Dial: srv.dial, Refresh: true})
	c, err := srv.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seed.Put(c)
	// The server counts the deposit once its accept returned.
	waitFor(t, "the deposit's accept", func() bool { return srv.accepts.Load() == 5 })
	before := srv.accepts.Load()
	got, fromPool, err := seed.Get(context.Background())
	if err != nil || !fromPool {
		t.Fatalf("the deposit: from the pool %v, %v", fromPool, err)
	}
	got.Close()
	time.Sleep(200 * time.Millisecond)
	if n := srv.accepts.Load(); n != before || seed.Stats().Idle != 0 {
		t.Fatalf("a pool without a level replaced a deposit taken: %d more accepts, %d pooled", n-before, seed.Stats().Idle)
	}
}
