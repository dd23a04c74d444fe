package track

import (
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Pacing shapes a user's bytes in one direction to its rate. Every flow and
// sub-link of the user's sessions draws on the same bucket, so together they
// move at most the rate, however many there are.
//
// A bucket is a virtual schedule (GCRA): tat is the moment every byte
// reserved so far is paid for. Bytes that moved are reserved at once and the
// mover then waits until tat, less a slack of paceWindow (or of minBurst
// bytes at low rates), so a flow may run that far ahead of the schedule
// before it waits: short bursts pass without a pause, and a mover that
// oversleeps a little loses nothing. An idle bucket forgets its past (tat
// never lies before now), so idleness saves no credit beyond the slack.
const (
	// paceWindow is the slack of a fast bucket, and the longest pause a
	// step of Step bytes costs.
	paceWindow = 50 * time.Millisecond
	// minBurst is the least slack in bytes, so a slow user's flows still
	// move whole segments between pauses.
	minBurst = 16 << 10
)

// bytesPerMbps converts megabits per second to bytes per second.
const bytesPerMbps = 1_000_000 / 8

// bucket paces one user's direction. The zero bucket is unpaced.
type bucket struct {
	rate   atomic.Int64 // bytes per second; 0 is unpaced
	tat    atomic.Int64 // nanoseconds since origin
	origin time.Time    // the bucket's monotonic clock starts here
}

// setMbps changes the rate; movers already waiting keep the pause they drew.
func (b *bucket) setMbps(mbps int) { b.rate.Store(int64(mbps) * bytesPerMbps) }

func (b *bucket) mbps() int { return int(b.rate.Load() / bytesPerMbps) }

// burst is the slack in bytes at rate (bytes per second).
func burst(rate int64) int64 {
	return max(rate*int64(paceWindow)/int64(time.Second), minBurst)
}

// step is how many bytes a mover should move at once: the slack, so each
// pause is at most about paceWindow; 0 when unpaced.
func (b *bucket) step() int64 {
	rate := b.rate.Load()
	if rate <= 0 {
		return 0
	}
	return burst(rate)
}

// reserve books n bytes that move now and returns how long their mover
// waits before it moves more: 0 when unpaced or within the slack.
func (b *bucket) reserve(n int64) time.Duration {
	rate := b.rate.Load()
	if rate <= 0 || n <= 0 {
		return 0
	}
	now := int64(time.Since(b.origin))
	cost := n * int64(time.Second) / rate
	slack := burst(rate) * int64(time.Second) / rate
	for {
		tat := b.tat.Load()
		next := max(tat, now) + cost
		if b.tat.CompareAndSwap(tat, next) {
			return time.Duration(next - slack - now)
		}
	}
}

// timers holds the timers of pauses, so a paced flow allocates none per
// pause in steady state.
var timers = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// pace books n bytes on b for the flow and waits out the pause they cost.
// It returns early, with the error its reads and writes now report, once
// the flow is closed or killed.
func (m *meter) pace(b *bucket, n int64) error {
	d := b.reserve(n)
	if d <= 0 {
		return nil
	}
	t := timers.Get().(*time.Timer)
	t.Reset(d)
	defer timers.Put(t)
	select {
	case <-t.C:
		return nil
	case <-m.done:
		t.Stop()
		if m.killed.Load() {
			return ErrKilled
		}
		return net.ErrClosed
	}
}
