package score

import "time"

// The first-choice performance heuristic's constants.
const (
	// PerfObservations is the WeightedMean's inertia: the newest four
	// observations of a metric, weighted 4, 3, 2, 1 newest first.
	PerfObservations = 4
	// PerfConfident is how long a metric's newest observation keeps full
	// confidence; it then loses it linearly until PerfExpiry.
	PerfConfident = 60 * time.Second
	// PerfExpiry is the age at which an observation no longer counts,
	// whatever the historical completion count.
	PerfExpiry = 120 * time.Second
)

// metric names one first-choice performance measurement, each kept and
// normalized in its own scope.
type metric uint8

const (
	metricSetup    metric = iota // begin → setup, ms (node-level: family and global layers)
	metricResponse               // first TX (or setup) → first response byte, ms
	metricUp                     // accepted TX goodput of a qualified window, bytes/s
	metricDown                   // delivered RX goodput of a qualified window, bytes/s
	nMetrics
)

// wmean is a bounded four-observation weighted mean with event times.
type wmean struct {
	v    [PerfObservations]float64
	at   [PerfObservations]int64
	n    uint8
	next uint8
}

func (w *wmean) add(at int64, v float64) {
	w.v[w.next], w.at[w.next] = v, at
	w.next = (w.next + 1) % PerfObservations
	if w.n < PerfObservations {
		w.n++
	}
}

// value returns the weighted mean of the observations younger than
// PerfExpiry at now and its confidence: 1 while the newest is at most
// PerfConfident old, falling linearly to 0 at PerfExpiry. ok is false
// when nothing counts.
func (w *wmean) value(now int64) (v, conf float64, ok bool) {
	var sum, weight float64
	newest := int64(-1 << 63)
	for j := 0; j < int(w.n); j++ {
		// j = 0 is the newest observation.
		i := (int(w.next) - 1 - j + 2*PerfObservations) % PerfObservations
		age := now - w.at[i]
		if age >= int64(PerfExpiry) {
			continue
		}
		wt := float64(PerfObservations - j)
		sum += wt * w.v[i]
		weight += wt
		newest = max(newest, w.at[i])
	}
	if weight == 0 {
		return 0, 0, false
	}
	age := now - newest
	conf = 1
	if age > int64(PerfConfident) {
		conf = float64(int64(PerfExpiry)-age) / float64(PerfExpiry-PerfConfident)
	}
	return sum / weight, conf, true
}

// perfState is a cell's first-choice performance metrics, allocated on
// the first measurement.
type perfState struct{ m [nMetrics]wmean }

func (c *cell) observe(m metric, at int64, v float64) {
	if at <= c.fence {
		return
	}
	if c.perf == nil {
		c.perf = &perfState{}
	}
	c.perf.m[m].add(at, v)
}

// perfOf reads metric m of c at now.
func perfOf(c *cell, m metric, now int64) (v, conf float64, ok bool) {
	if c == nil || c.perf == nil {
		return 0, 0, false
	}
	return c.perf.m[m].value(now)
}
