package remote

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Backoff bounds.
const (
	FirstRetry = 10 * time.Second
	MaxRetry   = 10 * time.Minute
)

// Backoff is the wait before the next try after failures failed downloads
// in a row (1 or more) of a resource downloaded every interval: 10 s,
// doubling, at most the smaller of the interval and 10 minutes (10 minutes
// for an interval of 0).
func Backoff(failures int, interval time.Duration) time.Duration {
	limit := MaxRetry
	if interval > 0 && interval < limit {
		limit = interval
	}
	d := FirstRetry
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// ErrUnknown: Update names no resource.
var ErrUnknown = errors.New("no such url provider or rule set")

// Status is one resource as readers see it.
type Status struct {
	Kind, Tag, URL, Via string
	Interval            time.Duration
	CachePath           string
	// Cached: a copy is on disk. UpdatedAt is when its content last
	// changed, FetchedAt the last download that reached the server.
	Cached               bool
	UpdatedAt, FetchedAt time.Time
	UserInfo             *UserInfo
	// Entries is the cached copy's node or rule count (0: not known, a
	// copy placed by hand).
	Entries int
	// Downloading: a download runs now. LastError is the last attempt's
	// failure ("" once one succeeds), at LastAttempt; NextAttempt is when
	// the schedule tries next (zero: not scheduled).
	Downloading              bool
	LastError                string
	LastAttempt, NextAttempt time.Time
}

// Options are an Updater's settings.
type Options struct {
	Fetcher *Fetcher
	// OnChange runs after a download changed r's cached copy; its error
	// (the new content refused by the apply) is the download's.
	OnChange func(r Resource) error
	Log      *slog.Logger
	// After, when set, replaces time.NewTimer for the schedule (tests):
	// it returns the channel that fires after d and a stop function.
	After func(d time.Duration) (<-chan time.Time, func())
}

// Updater keeps a set of resources downloaded on schedule. Its goroutines
// (one per scheduled resource) end by Close.
type Updater struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex // guards entries, started, closed; never held across a download
	entries map[key]*entry
	started bool
	closed  bool
	status  atomic.Pointer[[]Status]
}

type key struct{ kind, tag string }

// entry is one resource: its schedule's goroutine runs while stop is not
// called. sem serializes its downloads (the schedule's and Update's).
type entry struct {
	r    Resource
	sem  chan struct{}
	stop context.CancelFunc
	// done is closed when the schedule's goroutine has returned; nil
	// before one is scheduled.
	done chan struct{}
	st   Status // guarded by Updater.mu
}

// New makes an updater over rs; nothing runs before Start.
func New(rs []Resource, opts Options) *Updater {
	u := &Updater{opts: opts, log: opts.Log, entries: map[key]*entry{}}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	u.ctx, u.cancel = context.WithCancel(context.Background())
	for _, r := range rs {
		u.entries[key{r.Kind, r.Tag}] = newEntry(r)
	}
	u.publish()
	return u
}

func newEntry(r Resource) *entry {
	e := &entry{r: r, sem: make(chan struct{}, 1)}
	e.st = Status{Kind: r.Kind, Tag: r.Tag, URL: r.URL, Via: r.Via, Interval: r.Interval, CachePath: r.CachePath}
	if m, ok := ReadMeta(r.CachePath); ok {
		e.st.Cached, e.st.UpdatedAt, e.st.FetchedAt, e.st.UserInfo, e.st.Entries = true, m.UpdatedAt, m.FetchedAt, m.UserInfo, m.Entries
	}
	return e
}

// Start begins every resource's schedule.
func (u *Updater) Start() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.started || u.closed {
		return
	}
	u.started = true
	for _, e := range u.entries {
		u.schedule(e, nil)
	}
}

// Close stops every schedule and waits for the downloads in progress to
// end (they are canceled).
func (u *Updater) Close() {
	u.mu.Lock()
	u.closed = true
	u.mu.Unlock()
	u.cancel()
	u.wg.Wait()
}

// Reconfigure moves the updater to rs after a reload: a resource that is
// the same (same tag, URL, interval, via and cache) keeps its schedule;
// a changed one starts a new schedule; a removed one stops. It does not
// wait for the stopped schedules (one may be the caller, applying its
// download).
func (u *Updater) Reconfigure(rs []Resource) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return
	}
	next := make(map[key]*entry, len(rs))
	for _, r := range rs {
		k := key{r.Kind, r.Tag}
		if e, ok := u.entries[k]; ok && e.r.same(&r) {
			e.r.Validate = r.Validate
			next[k] = e
			delete(u.entries, k)
			continue
		}
		e := newEntry(r)
		next[k] = e
		if u.started {
			// A changed resource's previous schedule, stopped below, may be
			// writing the same cache: the new one starts once it is gone,
			// so that it never reads a copy half written (without its
			// meta, it would pass for a fresh copy).
			u.schedule(e, u.entries[k])
		}
	}
	for _, e := range u.entries {
		if e.stop != nil {
			e.stop()
		}
	}
	u.entries = next
	u.publishLocked()
}

// Status is the published snapshot, by kind then tag.
func (u *Updater) Status() []Status {
	if p := u.status.Load(); p != nil {
		return *p
	}
	return nil
}

// Update downloads the resource now, waiting for one in progress first;
// its error is the download's (or the apply's).
func (u *Updater) Update(ctx context.Context, kind, tag string) error {
	u.mu.Lock()
	e := u.entries[key{kind, tag}]
	closed := u.closed
	u.mu.Unlock()
	if e == nil {
		return fmt.Errorf("%s %q: %w", kind, tag, ErrUnknown)
	}
	if closed {
		return context.Canceled
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(u.ctx, cancel)
	defer stop()
	return u.download(ctx, e, "on demand")
}

// schedule starts e's goroutine; u.mu is held.
func (u *Updater) schedule(e, prev *entry) {
	ctx, stop := context.WithCancel(u.ctx)
	e.stop = stop
	e.done = make(chan struct{})
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		defer close(e.done)
		if prev != nil && prev.done != nil {
			<-prev.done
		}
		u.run(ctx, e)
	}()
}

// run is e's schedule: see the package doc.
func (u *Updater) run(ctx context.Context, e *entry) {
	wait := u.firstWait(e)
	failures := 0
	for {
		if wait > 0 {
			u.setNext(e, time.Now().Add(wait))
			if !u.sleep(ctx, wait) {
				return
			}
		}
		err := u.download(ctx, e, "scheduled")
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			wait = Backoff(failures, e.r.Interval)
			u.log.Warn(fmt.Sprintf("%s: the download failed; retrying in %s", e.r.name(), wait), "error", err)
			continue
		}
		failures = 0
		if e.r.Interval == 0 {
			u.setNext(e, time.Time{})
			return
		}
		wait = e.r.Interval
	}
}

// firstWait is 0 for a resource with no cached copy, a copy of another
// URL, one older than its interval, or one downloaded at start only
// (interval 0); else what is left of its interval.
func (u *Updater) firstWait(e *entry) time.Duration {
	m, ok := ReadMeta(e.r.CachePath)
	if !ok || e.r.Interval == 0 || (m.URL != "" && m.URL != e.r.URL) {
		return 0
	}
	age := time.Since(m.FetchedAt)
	if age >= e.r.Interval || age < 0 {
		return 0
	}
	return e.r.Interval - age
}

func (u *Updater) sleep(ctx context.Context, d time.Duration) bool {
	var c <-chan time.Time
	var stop func()
	if u.opts.After != nil {
		c, stop = u.opts.After(d)
	} else {
		t := time.NewTimer(d)
		c, stop = t.C, func() { t.Stop() }
	}
	defer stop()
	select {
	case <-ctx.Done():
		return false
	case <-c:
		return true
	}
}

// download runs one download of e (one at a time per resource), applies
// a change through OnChange and publishes the outcome.
func (u *Updater) download(ctx context.Context, e *entry, why string) error {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.sem }()
	u.edit(e, func(st *Status) { st.Downloading = true })
	start := time.Now()
	out, err := u.opts.Fetcher.Fetch(ctx, e.r)
	if err == nil && out.Changed && u.opts.OnChange != nil {
		if aerr := u.opts.OnChange(e.r); aerr != nil {
			err = fmt.Errorf("downloaded, but the configuration with it was refused: %w", aerr)
		}
	}
	u.edit(e, func(st *Status) {
		st.Downloading = false
		st.LastAttempt = start
		if err != nil {
			st.LastError = err.Error()
			return
		}
		st.LastError = ""
		st.Cached, st.UpdatedAt, st.FetchedAt = true, out.Meta.UpdatedAt, out.Meta.FetchedAt
		if !out.NotModified {
			st.Entries = out.Meta.Entries
		}
		if out.Meta.UserInfo != nil || !out.NotModified {
			st.UserInfo = out.Meta.UserInfo
		}
	})
	switch {
	case err != nil && errors.Is(err, ErrInvalid):
		u.log.Warn(fmt.Sprintf("%s: the download is refused, the previous copy stays", e.r.name()), "error", err)
	case err != nil:
	case out.Changed:
		u.log.Info(fmt.Sprintf("%s updated", e.r.name()), "size", out.Meta.Size, "why", why)
	case out.NotModified:
		u.log.Debug(fmt.Sprintf("%s not modified", e.r.name()), "why", why)
	default:
		u.log.Debug(fmt.Sprintf("%s unchanged", e.r.name()), "why", why)
	}
	return err
}

func (u *Updater) setNext(e *entry, t time.Time) {
	u.edit(e, func(st *Status) { st.NextAttempt = t })
}

// edit changes e's status and publishes the snapshot.
func (u *Updater) edit(e *entry, f func(*Status)) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f(&e.st)
	u.publishLocked()
}

func (u *Updater) publish() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.publishLocked()
}

func (u *Updater) publishLocked() {
	out := make([]Status, 0, len(u.entries))
	for _, e := range u.entries {
		out = append(out, e.st)
	}
	slices.SortFunc(out, func(a, b Status) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Tag, b.Tag))
	})
	u.status.Store(&out)
}
