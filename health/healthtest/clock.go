// Package healthtest holds test helpers for code built on package health:
// a fake Clock the engine runs on, and a scripted Prober.
package healthtest

import (
	"sync"
	"time"
)

// Clock is a fake health.Clock: time moves only by Advance, and timers run
// from Advance, synchronously, each with Now at its due time. The zero
// Clock starts at a fixed date; it is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*timer
}

type timer struct {
	due time.Time
	seq uint64 // ties run in arming order
	f   func()
}

// Epoch is where a zero Clock starts.
var Epoch = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a clock at start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

func (c *Clock) nowLocked() time.Time {
	if c.now.IsZero() {
		c.now = Epoch
	}
	return c.now
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nowLocked()
}

// AfterFunc arms f to run once the clock has advanced by d; f runs from
// the Advance that reaches it (a d of zero or less: the next Advance,
// Advance(0) included), never from AfterFunc itself. The returned function
// disarms it and reports whether it was armed.
func (c *Clock) AfterFunc(d time.Duration, f func()) func() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &timer{due: c.nowLocked().Add(max(d, 0)), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the clock by d, running every timer due on the way in due
// order, the clock set to its due time while it runs. A timer armed by a
// timer that runs is run too when it falls within d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.nowLocked().Add(d)
	for {
		i := c.nextLocked(target)
		if i < 0 {
			break
		}
		t := c.timers[i]
		c.timers = append(c.timers[:i], c.timers[i+1:]...)
		if t.due.After(c.now) {
			c.now = t.due
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	if target.After(c.now) {
		c.now = target
	}
	c.mu.Unlock()
}

// nextLocked returns the index of the earliest timer due by target, or -1.
func (c *Clock) nextLocked(target time.Time) int {
	best := -1
	for i, t := range c.timers {
		if t.due.After(target) {
			continue
		}
		if best < 0 || t.due.Before(c.timers[best].due) || (t.due.Equal(c.timers[best].due) && t.seq < c.timers[best].seq) {
			best = i
		}
	}
	return best
}

// Timers returns the number of armed timers.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}
