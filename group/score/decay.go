package score

import (
	"math"
	"time"
)

// HalfLife is the half-life of business attempt and outcome evidence.
const HalfLife = 30 * time.Minute

// The counts of one cell's evidence.
const (
	attempts = iota
	successes
	failures
	setupFails // failures before setup: a subset of failures
	nCounts
)

// evidence is a cell's counts, each halving every HalfLife. They are
// stored as of the latest event time and decay exactly on read, from
// event time (no timer, no sweep); sharing one time, a read costs one
// exponential. An event older than the latest is added at its own age, so
// the order of arrival does not change the result.
type evidence struct {
	v  [nCounts]float64
	at int64 // unix nanoseconds of the latest event
}

func decayFactor(d int64) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp2(-float64(d) / float64(HalfLife))
}

// add adds w to count i at event time at.
func (e *evidence) add(i int, at int64, w float64) {
	switch {
	case e.at == 0:
		e.at = at
	case at > e.at:
		f := decayFactor(at - e.at)
		for j := range e.v {
			e.v[j] *= f
		}
		e.at = at
	default:
		w *= decayFactor(e.at - at)
	}
	e.v[i] += w
}

// scaled returns the counts at now given f = decayFactor(now − e.at),
// computed by the caller (one view's layers share it); a now before the
// latest event reads them as of that event (f = 1).
func (e *evidence) scaled(f float64) [nCounts]float64 {
	v := e.v
	for j := range v {
		v[j] *= f
	}
	return v
}
