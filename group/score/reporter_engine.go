package score

import "time"

// The Engine's Flow drives its Reporter through these: each is one
// Reporter event plus what the ranking learns from it, under one lock.

// setupObserved records setup at at, after latency since the flow began,
// as the node-level setup metric (every layer). It reports whether this
// was the flow's first setup.
func (r *Reporter) setupObserved(at time.Time, latency time.Duration) bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled || r.setupAt != 0 {
		return false
	}
	t := at.UnixNano()
	r.setupAt = t
	if latency > 0 {
		ms := float64(latency) / float64(time.Millisecond)
		r.live(func(i int, c *cell) {
			if i == 2 {
				c.degrade(metricSetup, t, ms)
			}
			c.observe(metricSetup, t, ms)
		})
	}
	return true
}

// responseObserved records the flow's first response byte at at: the
// response latency (from the first TX, or setup when later) in every
// layer, and eligible RX. It returns the latency (0 when unmeasurable)
// and whether the RX is genuine scoped RX on a cell in hard failure
// state, strictly after its fence: what opens recovery.
func (r *Reporter) responseObserved(at time.Time) (latency time.Duration, recovery bool) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled {
		return 0, false
	}
	t := at.UnixNano()
	if from := max(r.setupAt, r.txAt); r.setupAt != 0 && from != 0 && t >= from {
		latency = time.Duration(t - from)
		ms := float64(latency) / float64(time.Millisecond)
		r.live(func(i int, c *cell) {
			if i == 2 {
				c.degrade(metricResponse, t, ms)
			}
			c.observe(metricResponse, t, ms)
		})
	}
	recovery = r.recoveryLocked(t, r.rxLocked(t))
	return latency, recovery
}

// progressObserved is Progress, reporting recovery as responseObserved.
func (r *Reporter) progressObserved(at time.Time, tx, rx int64) bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	if r.settled {
		return false
	}
	t := at.UnixNano()
	if tx > 0 && r.txAt == 0 {
		r.txAt = t
	}
	if rx <= 0 {
		return false
	}
	return r.recoveryLocked(t, r.rxLocked(t))
}

func (r *Reporter) recoveryLocked(t int64, eligible bool) bool {
	if !eligible {
		return false
	}
	rec := false
	r.live(func(i int, c *cell) {
		if (i == 0 || i == 2) && c.hard && t > c.fence {
			rec = true
		}
	})
	return rec
}

// goodputObserved records a qualified goodput window of direction m
// (metricUp or metricDown) ending at at, in bytes per second.
func (r *Reporter) goodputObserved(m metric, at time.Time, bps float64) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	t := at.UnixNano()
	r.live(func(_ int, c *cell) { c.observe(m, t, bps) })
}

// useful reports whether the flow has had eligible RX (a Settle now is a
// useful completion).
func (r *Reporter) useful() bool {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	return r.lastRX != 0 || r.pendingRX != 0
}
