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
