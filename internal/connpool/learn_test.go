package connpool

import (
	"context"
	"testing"
	"time"
)

// waitSettled waits for a pool to end its learning, within d.
func waitSettled(t *testing.T, p *Pool, d time.Duration) Stats {
	t.Helper()
	for deadline := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if st := p.Stats(); !st.Learning {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pool is still learning its bound after %s: %+v", d, p.Stats())
		}
	}
}

// watchOpen fails the test when the server holds more than n of the
// pool's connections open (one sentinel at most beyond the level) for
// longer than it takes to see a closed one's EOF after its replacement's
// accept.
func watchOpen(t *testing.T, srv *server, n int) (stop func()) {
	t.Helper()
	done, over := make(chan struct{}), make(chan int, 1)
	go func() {
		defer close(over)
		var since time.Time
		for {
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			o := srv.open()
			switch {
			case o <= n:
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			case time.Since(since) > 200*time.Millisecond:
				over <- o
				return
			}
		}
	}()
	return func() {
		close(done)
		if o, ok := <-over; ok {
			t.Errorf("the server held %d connections open, more than %d", o, n)
		}
	}
}

// A server that closes an idle connection after 2 s: the pool learns a
// bound of about 1 s, and hands out only connections younger than that
// (by the server's clock), each of which carries its flow.
func TestAShortIdleBoundIsLearned(t *testing.T) {
	t.Parallel()
	srv := newIdleServer(t, false, 2*time.Second)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true})
	ctx := context.Background()
	stop := watchOpen(t, srv, 2)
	if err := p.Fill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	st := waitSettled(t, p, 10*time.Second)
	stop()
	// Last seen open at 1.75–2 s, looks on time; earlier on a busy machine.
	if st.IdleBound < 600*time.Millisecond || st.IdleBound > time.Second || st.Sentinel {
		t.Fatalf("learned %s against a 2 s server: %+v", st.IdleBound, st)
	}
	hits := 0
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(170 * time.Millisecond) {
		if err := p.Fill(ctx, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(hits%7) * 200 * time.Millisecond)
		c, fromPool, err := p.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if fromPool {
			hits++
			if age := srv.age(t, c); age > st.IdleBound+250*time.Millisecond {
				t.Errorf("a connection %s old was handed out, past the bound %s", age, st.IdleBound)
			}
		}
		roundTrip(t, c)
		c.Close()
	}
	if hits == 0 {
		t.Fatal("nothing was handed out")
	}
}

// A server that closes an idle connection after 10 s: the bound grows
// from 3 s to about 9 s, and the kept connection is redialed about every
// 9 s instead of every 3 s.
func TestALongIdleBoundIsLearnedAndCutsTheChurn(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s of real time")
	}
	t.Parallel()
	srv := newIdleServer(t, false, 10*time.Second)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true})
	stop := watchOpen(t, srv, 2)
	defer stop()
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3500 * time.Millisecond)
	if st := p.Stats(); !st.Sentinel || st.IdleBound != DefaultIdle || st.Idle != 1 {
		t.Fatalf("past the starting bound: %+v", st)
	}
	st := waitSettled(t, p, 10*time.Second)
	if st.IdleBound < 7500*time.Millisecond || st.IdleBound > 9*time.Second || st.Sentinel {
		t.Fatalf("learned %s against a 10 s server: %+v", st.IdleBound, st)
	}
	before := srv.accepts.Load()
	time.Sleep(18 * time.Second)
	// At 3 s the window would take 6 connections; at about 9 s, 2 or 3.
	if n := srv.accepts.Load() - before; n > 3 || n < 1 {
		t.Fatalf("%d connections in 18 s with a bound of %s", n, st.IdleBound)
	}
	if st := p.Stats(); st.Idle != 1 || st.Learning {
		t.Fatalf("stats %+v", st)
	}
}

// A server that never closes an idle connection: the sentinel is still
// open at the cap, the bound becomes the cap less a second, and the
// sentinel is closed. Purge keeps the learned bound.
func TestTheBoundStopsAtTheCap(t *testing.T) {
	t.Parallel()
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true, Idle: time.Second, Cap: 4 * time.Second})
	stop := watchOpen(t, srv, 2)
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	st := waitSettled(t, p, 8*time.Second)
	stop()
	if st.IdleBound != 3*time.Second || st.Sentinel {
		t.Fatalf("at the cap: %+v", st)
	}
	// The first connection, the sentinel, is closed; the kept one follows
	// the 3 s bound from now on.
	waitFor(t, "the sentinel to be closed", func() bool { return srv.open() == 1 })
	p.Purge()
	if st := p.Stats(); st.IdleBound != 3*time.Second || st.Learning {
		t.Fatalf("after Purge: %+v", st)
	}
}

// A pooled connection found closed younger than the bound lowers it at
// once and starts the learning again.
func TestAnEarlyDeathLowersTheBound(t *testing.T) {
	t.Parallel()
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true, Idle: 10 * time.Second})
	ctx := context.Background()
	if err := p.Fill(ctx, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1600 * time.Millisecond)
	srv.conn(t, 0).Close()
	time.Sleep(5 * time.Millisecond)
	c, fromPool, err := p.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, c)
	c.Close()
	// Last seen open at 1.35–1.6 s (earlier on a busy machine): half of
	// that.
	st := p.Stats()
	if fromPool || st.Dead != 1 || st.IdleBound < MinIdle || st.IdleBound > 800*time.Millisecond || !st.Learning {
		t.Fatalf("from the pool %v, stats %+v", fromPool, st)
	}
}

// A server closing an idle connection within a second leaves nothing
// worth keeping: once a sentinel shows it, the pool stops redialing.
func TestAServerClosingWithinASecondIsNotKept(t *testing.T) {
	t.Parallel()
	srv := newIdleServer(t, false, 800*time.Millisecond)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true})
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	st := waitSettled(t, p, 8*time.Second)
	if st.IdleBound != MinIdle {
		t.Fatalf("stats %+v", st)
	}
	time.Sleep(time.Second) // a replacement in flight lands and expires
	n := srv.accepts.Load()
	time.Sleep(3 * time.Second)
	if m := srv.accepts.Load(); m != n {
		t.Fatalf("%d more connections to a server that closes them within a second", m-n)
	}
	waitFor(t, "the reaper to end", func() bool { p.mu.Lock(); defer p.mu.Unlock(); return !p.reaping })
}

// Two kept connections reaching the bound together make one sentinel,
// never two.
func TestAtMostOneSentinel(t *testing.T) {
	t.Parallel()
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true, Idle: 300 * time.Millisecond})
	stop := watchOpen(t, srv, 3)
	defer stop()
	if err := p.Fill(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a sentinel", func() bool { return p.Stats().Sentinel })
	time.Sleep(2 * time.Second)
	if st := p.Stats(); !st.Sentinel || st.Idle == 0 || !st.Learning {
		t.Fatalf("stats %+v", st)
	}
}

// A pool that only got a deposit (a startup seed, no level) holds no
// sentinel: its connection is closed at the bound.
func TestADepositIsNoSentinel(t *testing.T) {
	t.Parallel()
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true, Idle: 200 * time.Millisecond})
	c, err := srv.dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !p.Put(c) {
		t.Fatal("the deposit was refused")
	}
	waitFor(t, "the deposit to be closed", func() bool { return srv.eofs.Load() == 1 })
	if st := p.Stats(); st.Sentinel || st.Expired != 1 || srv.accepts.Load() != 1 {
		t.Fatalf("stats %+v, %d accepts", st, srv.accepts.Load())
	}
}

// A learned bound stands for Relearn; then the next kept connection to
// reach it is a sentinel again, one at most, and the learning ends anew.
func TestALearnedBoundIsLearnedAgain(t *testing.T) {
	t.Parallel()
	srv := newServer(t, false)
	p := newPool(t, Config{Dial: srv.dial, Refresh: true, Idle: 500 * time.Millisecond, Cap: 2 * time.Second, Relearn: time.Second})
	stop := watchOpen(t, srv, 2)
	defer stop()
	if err := p.Fill(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	if st := waitSettled(t, p, 5*time.Second); st.IdleBound != time.Second {
		t.Fatalf("at the cap: %+v", st)
	}
	waitFor(t, "a second sentinel", func() bool { st := p.Stats(); return st.Learning && st.Sentinel })
	if st := waitSettled(t, p, 5*time.Second); st.IdleBound != time.Second || st.Sentinel {
		t.Fatalf("learned again: %+v", st)
	}
}
