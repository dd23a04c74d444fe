// Package ratelog keeps a recurring event's log lines to one per interval:
// the first event is logged at once, the ones after it within the interval
// are counted and reported by the next line.
package ratelog

import (
	"sync"
	"time"
)

// Limiter decides when a line about an event is due. The zero value logs at
// most once every DefaultEvery.
type Limiter struct {
	Every time.Duration    // 0: DefaultEvery
	Now   func() time.Time // nil: time.Now

	mu     sync.Mutex // guards the fields below
	last   time.Time  // when the latest line was due; zero before the first
	since  int64      // events since the latest line, the one it reported included
	total  int64
	logged bool
}

// DefaultEvery is the interval of a zero Limiter.
const DefaultEvery = 10 * time.Second

// Note records one event. When a line is due it returns true with the
// number of events that line reports (this one and those suppressed since
// the previous line) and the total so far.
func (l *Limiter) Note() (count, total int64, due bool) {
	now := time.Now
	if l.Now != nil {
		now = l.Now
	}
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	t := now()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since++
	l.total++
	if l.logged && t.Sub(l.last) < every {
		return 0, l.total, false
	}
	count = l.since
	l.since, l.last, l.logged = 0, t, true
	return count, l.total, true
}

// Total is the number of events recorded.
func (l *Limiter) Total() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}
