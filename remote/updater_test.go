package remote

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		interval time.Duration
		want     []time.Duration
	}{
		{time.Hour, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 320 * s, 600 * s, 600 * s}},
		{30 * s, []time.Duration{10 * s, 20 * s, 30 * s, 30 * s}},
		{0, []time.Duration{10 * s, 20 * s, 40 * s, 80 * s, 160 * s, 320 * s, 600 * s, 600 * s}},
		{5 * s, []time.Duration{5 * s, 5 * s}},
	} {
		for i, want := range c.want {
			if got := Backoff(i+1, c.interval); got != want {
				t.Errorf("Backoff(%d, %s) = %s, want %s", i+1, c.interval, got, want)
			}
		}
	}
	if got := Backoff(1000, time.Hour); got != MaxRetry {
		t.Errorf("Backoff(1000) = %s", got)
	}
}

// fakeTimers hands the updater's waits to the test, which fires them.
type fakeTimers struct {
	waits chan time.Duration
	fire  chan chan time.Time
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{waits: make(chan time.Duration, 16), fire: make(chan chan time.Time, 16)}
}

func (f *fakeTimers) after(d time.Duration) (<-chan time.Time, func()) {
	c := make(chan time.Time, 1)
	f.waits <- d
	f.fire <- c
	return c, func() {}
}

// next waits for the updater's next wait and fires it.
func (f *fakeTimers) next(t *testing.T) time.Duration {
	t.Helper()
	d, fire := f.wait(t)
	fire()
	return d
}

// wait waits for the updater's next wait; fire ends it.
func (f *fakeTimers) wait(t *testing.T) (time.Duration, func()) {
	t.Helper()
	select {
	case d := <-f.waits:
		c := <-f.fire
		return d, func() { c <- time.Now() }
	case <-time.After(5 * time.Second):
		t.Fatal("the updater scheduled no wait")
		return 0, nil
	}
}

// A failing download is retried on the backoff schedule; once it
// succeeds the resource waits its interval.
func TestTheUpdaterRetriesOnTheBackoffSchedule(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		if fail.Load() {
			http.Error(w, "down", http.StatusBadGateway)
			return
		}
		w.Write([]byte("socks5://127.0.0.1:1#A\n"))
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	timers := newFakeTimers()
	r := resource(t, srv.URL)
	r.Interval = time.Hour
	var changes atomic.Int32
	u := New([]Resource{r}, Options{Fetcher: f, After: timers.after, OnChange: func(Resource) error { changes.Add(1); return nil }})
	u.Start()
	defer u.Close()
	s := time.Second
	for _, want := range []time.Duration{10 * s, 20 * s, 40 * s, 80 * s} {
		if got := timers.next(t); got != want {
			t.Fatalf("wait %s, want %s", got, want)
		}
	}
	got, fire := timers.wait(t)
	if got != 160*s {
		t.Fatalf("wait %s, want 160s (the fifth failure)", got)
	}
	st := u.Status()
	if len(st) != 1 || !strings.Contains(st[0].LastError, "502") || st[0].Cached || hits.Load() != 5 {
		t.Fatalf("status %+v, %d downloads", st, hits.Load())
	}
	// The next download succeeds; the wait after it is the interval.
	fail.Store(false)
	fire()
	if got := timers.next(t); got != time.Hour {
		t.Fatalf("wait after a success %s, want the interval", got)
	}
	if changes.Load() != 1 {
		t.Fatalf("%d changes", changes.Load())
	}
	st = u.Status()
	if st[0].LastError != "" || !st[0].Cached || st[0].UpdatedAt.IsZero() {
		t.Fatalf("status after the success %+v", st[0])
	}
}

// At start a resource with a fresh cache waits what is left of its
// interval; a stale one, or one with no cache, is downloaded at once.
func TestTheFirstWait(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("socks5://127.0.0.1:1#A\n"))
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	r := resource(t, srv.URL)
	r.Interval = time.Hour
	u := New(nil, Options{Fetcher: f})
	defer u.Close()
	e := newEntry(r)
	if w := u.firstWait(e); w != 0 {
		t.Fatalf("no cache: wait %s", w)
	}
	if _, err := f.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if w := u.firstWait(e); w < 59*time.Minute || w > time.Hour {
		t.Fatalf("fresh cache: wait %s", w)
	}
	m, _ := ReadMeta(r.CachePath)
	m.FetchedAt = time.Now().Add(-2 * time.Hour)
	if err := writeMeta(r.CachePath, m); err != nil {
		t.Fatal(err)
	}
	if w := u.firstWait(e); w != 0 {
		t.Fatalf("stale cache: wait %s", w)
	}
	e.r.Interval = 0
	m.FetchedAt = time.Now()
	writeMeta(r.CachePath, m)
	if w := u.firstWait(e); w != 0 {
		t.Fatalf("interval 0: wait %s, want a download at start", w)
	}
}

// Update downloads at once and applies a change before it returns; an
// unknown tag is ErrUnknown; the status shows the userinfo.
func TestUpdateNow(t *testing.T) {
	var body atomic.Value
	body.Store("socks5://127.0.0.1:1#A\n")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("subscription-userinfo", "upload=1; download=2; total=3; expire=4")
		w.Write([]byte(body.Load().(string)))
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	r := resource(t, srv.URL)
	r.Interval = 0
	r.Validate = func(b []byte) (int, error) { return strings.Count(string(b), "\n"), nil }
	var mu sync.Mutex
	var applied []string
	u := New([]Resource{r}, Options{Fetcher: f, OnChange: func(r Resource) error {
		b, _ := os.ReadFile(r.CachePath)
		mu.Lock()
		applied = append(applied, string(b))
		mu.Unlock()
		return nil
	}})
	defer u.Close()
	if err := u.Update(context.Background(), KindProvider, "sub"); err != nil {
		t.Fatal(err)
	}
	body.Store("socks5://127.0.0.1:2#B\n")
	if err := u.Update(context.Background(), KindProvider, "sub"); err != nil {
		t.Fatal(err)
	}
	if err := u.Update(context.Background(), KindProvider, "sub"); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(applied) != 2 || applied[1] != "socks5://127.0.0.1:2#B\n" {
		t.Fatalf("applied %q", applied)
	}
	mu.Unlock()
	if err := u.Update(context.Background(), KindRuleSet, "sub"); !errors.Is(err, ErrUnknown) {
		t.Fatalf("unknown: %v", err)
	}
	st := u.Status()[0]
	if st.UserInfo == nil || *st.UserInfo != (UserInfo{1, 2, 3, 4}) || st.Entries != 1 || !st.Cached {
		t.Fatalf("status %+v", st)
	}
}

// An apply that refuses the new content is the download's error.
func TestARefusedApplyIsTheError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("x")) }))
	defer srv.Close()
	f, _ := fetcher(t)
	u := New([]Resource{resource(t, srv.URL)}, Options{Fetcher: f, OnChange: func(Resource) error { return errors.New("bad node") }})
	defer u.Close()
	err := u.Update(context.Background(), KindProvider, "sub")
	if err == nil || !strings.Contains(err.Error(), "bad node") || u.Status()[0].LastError == "" {
		t.Fatalf("error %v status %+v", err, u.Status())
	}
}

// Reconfigure keeps an unchanged resource's schedule, starts a changed
// one's, stops a removed one; Close waits for all (goleak checks).
func TestReconfigure(t *testing.T) {
	var hits sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := hits.LoadOrStore(r.URL.Path, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		w.Write([]byte("socks5://127.0.0.1:1#A\n"))
	}))
	defer srv.Close()
	count := func(p string) int32 {
		n, ok := hits.Load(p)
		if !ok {
			return 0
		}
		return n.(*atomic.Int32).Load()
	}
	f, _ := fetcher(t)
	a, b := resource(t, srv.URL+"/a"), resource(t, srv.URL+"/b")
	a.Tag, b.Tag = "a", "b"
	a.Interval, b.Interval = time.Hour, time.Hour
	u := New([]Resource{a, b}, Options{Fetcher: f})
	u.Start()
	waitFor(t, func() bool { return count("/a") == 1 && count("/b") == 1 })
	b2 := b
	b2.URL = srv.URL + "/b2"
	c := resource(t, srv.URL+"/c")
	c.Tag = "c"
	u.Reconfigure([]Resource{a, b2, c})
	waitFor(t, func() bool { return count("/b2") == 1 && count("/c") == 1 })
	u.Reconfigure([]Resource{a})
	if st := u.Status(); len(st) != 1 || st[0].Tag != "a" {
		t.Fatalf("status %+v", st)
	}
	u.Close()
	if count("/a") != 1 {
		t.Fatalf("the unchanged resource was downloaded %d times", count("/a"))
	}
	if err := u.Update(context.Background(), KindProvider, "a"); err == nil {
		t.Fatal("Update after Close succeeded")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
