package health

import (
	"time"

	"switchyard/netx"
)

// cell is the state of one (domain, family) of a node, or of one per-group
// check_url. Its owner's mutex guards it.
type cell struct {
	observed     bool // a probe or real traffic has reported on it
	alive        bool
	probeFails   int       // consecutive probe failures (they set the cooldown)
	trafficFails int       // consecutive real-traffic failures
	recoverOK    int       // consecutive probe successes while dead
	primed       bool      // dead, after a network change: one success recovers
	cooldown     time.Time // a dead state is probed again from then on
	changed      time.Time // last alive/dead transition
	avg          time.Duration
	hasAvg       bool
	hist         *ring // allocated by the first entry
}

func newCell() cell { return cell{alive: true} }

// cooldownAfter is the wait after the n-th consecutive probe failure:
// 5 s doubling up to 300 s (5, 10, 20, 40, 80, 160, 300, 300 ...).
func cooldownAfter(n int) time.Duration {
	d := CooldownMin
	for i := 1; i < n && d < CooldownMax; i++ {
		d *= 2
	}
	return min(d, CooldownMax)
}

func (c *cell) record(now time.Time, d time.Duration, synth bool) {
	if c.hist == nil {
		c.hist = new(ring)
	}
	c.hist.add(newEntry(now, d, synth))
}

// average folds a real sample into the halving moving average: the first
// sample initializes it, then next = (previous + sample) / 2.
func (c *cell) average(d time.Duration) {
	if !c.hasAvg {
		c.avg, c.hasAvg = d, true
		return
	}
	c.avg = (c.avg + d) / 2
}

// change is what an update did to a cell's liveness.
type change uint8

const (
	unchanged change = iota
	died
	revived
)

// probeOK applies one probe success: the sample enters the history and the
// average; a dead state revives on its second consecutive success (its
// first after a network change). The first success of a dead state makes
// its cooldown due, so the recovery scheduler verifies it at once.
func (c *cell) probeOK(now time.Time, rtt time.Duration) change {
	c.record(now, rtt, false)
	c.average(rtt)
	return c.probeAlive(now)
}

// probeAlive applies a probe success that brings no latency sample of the
// state (the Score QUIC handshake for DataUdp): liveness, cooldown and
// recovery as probeOK, nothing in the history or the average.
func (c *cell) probeAlive(now time.Time) change {
	c.observed = true
	c.probeFails = 0
	c.cooldown = time.Time{}
	if c.alive {
		return unchanged
	}
	c.recoverOK++
	if c.recoverOK < RecoverySuccesses && !c.primed {
		c.cooldown = now
		return unchanged
	}
	c.alive = true
	c.recoverOK, c.primed, c.trafficFails = 0, false, 0
	c.changed = now
	return revived
}

// probeFail applies one probe failure and reports whether the state has
// reached its death threshold. A failure that does not count toward death
// (in the grace of a new node) is only recorded, unless the state is dead
// already: then it still moves the cooldown, or the recovery scheduler
// would probe it on every pass.
func (c *cell) probeFail(now time.Time, counts bool) (dies bool) {
	c.observed = true
	c.record(now, 0, false)
	c.recoverOK, c.primed = 0, false
	if !counts && c.alive {
		return false
	}
	c.probeFails++
	c.cooldown = now.Add(cooldownAfter(c.probeFails))
	return c.alive && c.probeFails >= ProbeFailures
}

// trafficOK applies one real success: it resets the real-traffic count.
// It does not revive a dead state (probes do), but makes its cooldown due
// so the recovery scheduler probes it at its next pass.
func (c *cell) trafficOK(now time.Time) {
	c.observed = true
	c.trafficFails = 0
	if !c.alive && c.cooldown.After(now) {
		c.cooldown = now
	}
}

// trafficFail applies one real failure and reports whether the state has
// reached threshold.
func (c *cell) trafficFail(threshold int, counts bool) (dies bool) {
	c.observed = true
	if !counts {
		return false
	}
	c.trafficFails++
	return c.alive && c.trafficFails >= threshold
}

// die makes the state dead. A death by real traffic leaves the cooldown
// at least one first step away, so recovery probing starts 5 s later.
func (c *cell) die(now time.Time) {
	c.alive = false
	c.recoverOK, c.primed = 0, false
	c.changed = now
	if c.cooldown.Before(now) {
		c.cooldown = now.Add(CooldownMin)
	}
}

// networkChanged forgets what the previous network taught: stale cooldowns
// and probe failure counts go; a dead state is primed so one fresh probe
// success verifies its recovery.
func (c *cell) networkChanged() {
	c.cooldown = time.Time{}
	c.probeFails = 0
	c.recoverOK = 0
	c.primed = !c.alive
}

// explicitlyAlive reports whether an observation showed the state alive.
func (c *cell) explicitlyAlive() bool { return c.observed && c.alive }

// due reports whether the state is dead with its cooldown elapsed.
func (c *cell) due(now time.Time) bool { return !c.alive && !c.cooldown.After(now) }

// DomainState is the introspected state of one domain and family of a node,
// or of one per-group check_url.
type DomainState struct {
	// Observed is false while nothing ever reported on the state; such a
	// state is alive.
	Observed bool
	Alive    bool
	// ProbeFailures and TrafficFailures are the consecutive failures
	// counted toward death; RecoverySuccesses the consecutive probe
	// successes of a dead state.
	ProbeFailures, TrafficFailures, RecoverySuccesses int
	// Primed is set on a dead state by a network change: its next probe
	// success revives it.
	Primed bool
	// CooldownUntil is when a dead state is probed again (zero: no
	// cooldown); LastChange the last alive/dead transition.
	CooldownUntil, LastChange time.Time
	// Latency is the halving moving average of real samples.
	Latency    time.Duration
	HasLatency bool
	// History is the probe history, oldest first, at most HistorySize
	// entries, synthetic placeholders included and flagged.
	History []Sample
}

// Display returns the history shown to users: without synthetic
// placeholders.
func (s DomainState) Display() []Sample {
	out := make([]Sample, 0, len(s.History))
	for _, x := range s.History {
		if !x.Synthetic {
			out = append(out, x)
		}
	}
	return out
}

func (c *cell) state(f netx.Family) DomainState {
	return DomainState{
		Observed:          c.observed,
		Alive:             c.alive,
		ProbeFailures:     c.probeFails,
		TrafficFailures:   c.trafficFails,
		RecoverySuccesses: c.recoverOK,
		Primed:            c.primed,
		CooldownUntil:     c.cooldown,
		LastChange:        c.changed,
		Latency:           c.avg,
		HasLatency:        c.hasAvg,
		History:           c.hist.samples(f),
	}
}
