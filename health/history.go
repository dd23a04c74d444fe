package health

import (
	"time"

	"switchyard/netx"
)

// Sample is one entry of a probe history, or the last real delay of a node.
type Sample struct {
	// Time is when the measurement ended, on the engine's clock (the wall
	// clock in production).
	Time time.Time
	// Delay is the measured round trip; zero means the measurement failed.
	Delay time.Duration
	// Family is the address family of the state the sample belongs to.
	Family netx.Family
	// Synthetic marks a placeholder appended for two consecutive real dial
	// failures: it is never a measurement, never part of a moving average,
	// never shown as history and never the last real sample.
	Synthetic bool
}

// entry is a Sample as a history keeps it: 16 bytes.
type entry struct {
	at    int64  // unix nanoseconds
	us    uint32 // delay in microseconds; 0: a failure
	synth bool
}

// maxEntryDelay is the largest delay an entry holds (about 71 minutes):
// far beyond any probe timeout.
const maxEntryDelay = time.Duration(^uint32(0)) * time.Microsecond

func newEntry(at time.Time, d time.Duration, synth bool) entry {
	var us uint32
	switch {
	case d <= 0:
		us = 0
	case d >= maxEntryDelay:
		us = ^uint32(0)
	default:
		us = max(uint32(d/time.Microsecond), 1) // a success is never 0
	}
	return entry{at: at.UnixNano(), us: us, synth: synth}
}

func (x entry) sample(f netx.Family) Sample {
	return Sample{
		Time:      time.Unix(0, x.at),
		Delay:     time.Duration(x.us) * time.Microsecond,
		Family:    f,
		Synthetic: x.synth,
	}
}

// ring is the bounded probe history of one state: the last HistorySize
// entries, oldest overwritten first.
type ring struct {
	e    [HistorySize]entry
	next int // where the next entry goes
	n    int // entries held, at most HistorySize
}

func (r *ring) add(x entry) {
	r.e[r.next] = x
	r.next = (r.next + 1) % HistorySize
	if r.n < HistorySize {
		r.n++
	}
}

// samples returns the entries oldest first.
func (r *ring) samples(f netx.Family) []Sample {
	if r == nil || r.n == 0 {
		return nil
	}
	out := make([]Sample, 0, r.n)
	start := (r.next - r.n + HistorySize) % HistorySize
	for i := range r.n {
		out = append(out, r.e[(start+i)%HistorySize].sample(f))
	}
	return out
}
