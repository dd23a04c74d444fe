package dns

import (
	"sync/atomic"
	"time"
)

// LatencyBounds are the upper bounds of the latency histogram's buckets;
// the last bucket of Stats.Latency counts the slower exchanges.
var LatencyBounds = [...]time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
}

// Stats are a resolver's counters since it was made, read without locks.
type Stats struct {
	Name      string // the resolver's name ("servers", "pre_proxy", "rule 1", ...)
	Queries   uint64 // questions asked (Exchange and LookupIP calls)
	CacheHits uint64 // questions answered from the cache
	Failures  uint64 // questions that got no usable answer (an error, SERVFAIL, REFUSED)
	Exchanges uint64 // exchanges with servers, failed ones included
	// LatencySum is the total time of the exchanges, and Latency their
	// histogram over LatencyBounds.
	LatencySum time.Duration
	Latency    [len(LatencyBounds) + 1]uint64
	Servers    []ServerStats
}

// ServerStats are one server's counters within a resolver.
type ServerStats struct {
	URL        string
	Exchanges  uint64
	Failures   uint64 // exchanges that failed (no answer, a broken one, a transport error)
	LatencySum time.Duration
}

// MeanLatency is the mean time of an exchange, 0 before the first.
func (s Stats) MeanLatency() time.Duration {
	if s.Exchanges == 0 {
		return 0
	}
	return s.LatencySum / time.Duration(s.Exchanges)
}

type resolverCounters struct {
	queries, hits, failures atomic.Uint64
}

type serverCounters struct {
	exchanges, failures atomic.Uint64
	latency             atomic.Int64 // nanoseconds
	buckets             [len(LatencyBounds) + 1]atomic.Uint64
}

func (c *serverCounters) record(d time.Duration, failed bool) {
	c.exchanges.Add(1)
	if failed {
		c.failures.Add(1)
	}
	c.latency.Add(int64(d))
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	c.buckets[i].Add(1)
}
