package slot

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Users, purges, losses and deaths race: a resource is never closed under
// a user except by a loss or a cut, every resource ends with Close, and no
// goroutine is left (goleak).
func TestConcurrentUsePurgeAndLoss(t *testing.T) {
	var made []*fakeRes
	var mu sync.Mutex
	var n atomic.Int32
	s := New(Config[*fakeRes]{
		Establish: func(ctx context.Context) (*fakeRes, error) {
			r := &fakeRes{id: int(n.Add(1)), done: make(chan struct{})}
			mu.Lock()
			made = append(made, r)
			mu.Unlock()
			return r, nil
		},
		Policy: Policy{IgnoreDeaths: true},
	})
	var cutUnder atomic.Int32 // a purged resource closed while a user held it
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				r, err := s.Acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				switch {
				case i == 0 && j%7 == 0:
					s.Purge()
					if r.V.closed.Load() && !r.V.killed.Load() {
						cutUnder.Add(1)
					}
					r.Release()
				case i == 1 && j%11 == 0:
					r.V.killed.Store(true)
					r.Release()
					s.Lost(r)
				case i == 2 && j%13 == 0:
					r.V.killed.Store(true)
					r.V.Close() // dies by itself
					r.Release()
				default:
					time.Sleep(10 * time.Microsecond)
					r.Release()
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	s.Close()
	if c := cutUnder.Load(); c != 0 {
		t.Fatalf("a purge closed %d resources under their users", c)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range made {
		if !r.closed.Load() {
			t.Fatalf("resource %d left open after Close", r.id)
		}
	}
	if len(made) < 2 {
		t.Fatalf("only %d resources: the race did not replace any", len(made))
	}
}

// Detached users race the shared ones, purges and Close: a resource is
// never closed under its holder, none is left open or counted detached
// once every holder released it, and Close ends the rest.
func TestConcurrentDetachedUseAndAdopt(t *testing.T) {
	var made []*fakeRes
	var mu sync.Mutex
	var n atomic.Int32
	s := New(Config[*fakeRes]{
		Establish: func(ctx context.Context) (*fakeRes, error) {
			r := &fakeRes{id: int(n.Add(1)), done: make(chan struct{})}
			mu.Lock()
			made = append(made, r)
			mu.Unlock()
			return r, nil
		},
		Policy: Policy{IgnoreDeaths: true},
	})
	var closedUnder, adopted atomic.Int32
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ; j++ {
				select {
				case <-stop:
					return
				default:
				}
				acquire := s.Acquire
				if i%2 == 0 {
					acquire = s.AcquireDetached
				}
				r, err := acquire(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if j%5 == 0 && s.Adopt(r) {
					adopted.Add(1)
				}
				if i == 1 && j%9 == 0 {
					s.Purge()
				}
				time.Sleep(5 * time.Microsecond)
				if r.V.closed.Load() {
					closedUnder.Add(1)
				}
				r.Release()
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	if c := closedUnder.Load(); c != 0 {
		t.Fatalf("%d resources closed under their holders", c)
	}
	if st := s.State(); st.Detached != 0 || st.Retired != 0 {
		t.Fatalf("with every hold released: %+v", st)
	}
	mu.Lock()
	open := 0
	for _, r := range made {
		if !r.closed.Load() {
			open++
		}
	}
	mu.Unlock()
	if _, up := s.Current(); open > 1 || (open == 1 && !up) {
		t.Fatalf("%d resources open with every hold released (one in service: %v)", open, up)
	}
	t.Logf("%d adoptions in the race", adopted.Load())
	// One held detached resource and one adopted at Close.
	s.Purge()
	kept, err := s.AcquireDetached(context.Background())
	if err != nil || !s.Adopt(kept) {
		t.Fatalf("adopting after the race: %v", err)
	}
	s.Purge()
	if _, err := s.AcquireDetached(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	mu.Lock()
	defer mu.Unlock()
	for _, r := range made {
		if !r.closed.Load() {
			t.Fatalf("resource %d left open after Close", r.id)
		}
	}
}
