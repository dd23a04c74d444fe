package score

import (
	"math"
	"time"
)

// HalfLife is the half-life of business attempt and outcome evidence.
const HalfLife = 30 * time.Minute

// decayed is a count that halves every HalfLife. It stores its value as of
// its latest event time and decays exactly on read, from event time (no
// timer, no periodic sweep). An event older than the latest one is added
// at its own age, so the order of arrival does not change the result.
type decayed struct {
	v  float64
	at int64 // unix nanoseconds of the latest event
}

func decayFactor(d int64) float64 {
	if d <= 0 {
		return 1
	}
	return math.Exp2(-float64(d) / float64(HalfLife))
}

// add adds w at event time at.
func (d *decayed) add(at int64, w float64) {
	switch {
	case d.v == 0 && d.at == 0:
		d.v, d.at = w, at
	case at >= d.at:
		d.v = d.v*decayFactor(at-d.at) + w
		d.at = at
	default:
		d.v += w * decayFactor(d.at-at)
	}
}

// get returns the value at now; a now before the latest event reads the
// value as of that event.
func (d decayed) get(now int64) float64 { return d.v * decayFactor(now-d.at) }
