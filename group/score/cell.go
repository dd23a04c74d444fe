package score

import "time"

// The evidence rules' constants (see the package documentation).
const (
	// Qualify is the number of effective useful completions that qualify
	// a cell.
	Qualify = 4
	// Lease is how long qualification lasts from the event that earned or
	// refreshed it (a useful completion, fresh targeted business RX, the
	// fourth recovery reporter).
	Lease = 60 * time.Second
	// CohortGap resets an availability cohort: eligible RX at least this
	// long after the cohort's latest starts a new one.
	CohortGap = 60 * time.Second
	// Reporters is the number of distinct reporters an availability
	// cohort needs: recent usability, and recovery from a hard episode.
	Reporters = 4
)

// cell is the evidence of one key, exact or aggregate. Every time is unix
// nanoseconds of an event; 0 is "never".
type cell struct {
	dead bool // removed from its table: reporters holding it drop their events
	inc  uint64

	// Numeric evidence, decayed with HalfLife. Failures count every
	// failure; setupFails is the subset before setup, which weighs extra.
	ev evidence

	// Hard failure state. fence is the latest applied failure or reload:
	// availability RX and completions count only strictly after it.
	hard   bool
	failAt int64
	fence  int64
	// episode is the latest target-scoped episode applied (exact cells);
	// nodeEpisode the latest node episode applied (every cell).
	episode, nodeEpisode EpisodeID

	// parentSeq is the node record of the global aggregate this child
	// has applied (family aggregates and exact cells). nodeSeq and nodeAt
	// are a global aggregate's own record of its latest node episode.
	parentSeq, nodeSeq uint64
	nodeAt             int64

	// Qualification: effective useful completions since the fence, whether
	// qualification is earned, and the lease end (exclusive).
	completions uint32
	earned      bool
	lease       int64

	// The availability cohort: distinct reporter ids, its latest RX.
	cohort   [Reporters]uint64
	cohortN  uint8
	cohortAt int64

	// The configured-probe slot (global aggregates only).
	probeRTT     time.Duration
	probeStarted int64
	probeOK      bool

	// First-choice performance metrics (perf.go), nil until measured.
	perf *perfState
	// degraded is the latest setup or response sample that degraded
	// against this cell's own history (exact cells; 0: none).
	degraded int64

	// An exact cell's family and global aggregates as last resolved: a
	// rank's shortcut past two lookups, valid while neither is dead.
	pf, pg *cell
}

// revoke drops qualification, its lease and the availability cohort.
func (c *cell) revoke() {
	c.earned = false
	c.lease = 0
	c.completions = 0
	c.cohortN = 0
	c.cohortAt = 0
}

// open opens hard failure state at at.
func (c *cell) open(at int64) {
	c.hard = true
	c.failAt = max(c.failAt, at)
	c.fence = max(c.fence, at)
	c.revoke()
}

// targetFailure applies a target-scoped failure of episode ep. A failure
// of the episode the cell already applied changes nothing: delayed fanout
// of one shared failure neither restarts an episode nor resets a recovery
// under way or complete.
func (c *cell) targetFailure(at int64, ep EpisodeID) {
	if c.episode == ep {
		return
	}
	c.episode = ep
	c.open(at)
}

// nodeFailure applies a node episode directly, once per episode.
func (c *cell) nodeFailure(at int64, ep EpisodeID) {
	if c.nodeEpisode == ep {
		return
	}
	c.nodeEpisode = ep
	c.open(at)
}

// recordNode records a node-scoped failure on a global aggregate and
// applies it; seq orders node records scorer-wide, so children learn it.
func (c *cell) recordNode(at int64, ep EpisodeID, seq uint64) {
	if c.nodeEpisode == ep {
		return
	}
	c.nodeSeq, c.nodeAt = seq, at
	c.nodeFailure(at, ep)
}

// inherit initializes a new child from its global aggregate p: the node's
// incarnation, failure time and episode. A child born inside an open node
// episode starts hard (it needs its own four reporters); one born after
// the episode recovered keeps its fence and the episode identity, so a
// delayed report of that episode does not restart it.
func (c *cell) inherit(p *cell) {
	c.inc = p.inc
	c.fence = max(c.fence, p.fence)
	c.parentSeq = p.nodeSeq
	c.nodeEpisode = p.nodeEpisode
	c.failAt = p.nodeAt
	if p.hard {
		c.open(p.nodeAt)
	}
}

// sync applies the global aggregate p's newer node record to this child.
func (c *cell) sync(p *cell) {
	if p == nil || p.nodeSeq <= c.parentSeq {
		return
	}
	c.parentSeq = p.nodeSeq
	c.nodeFailure(p.nodeAt, p.nodeEpisode)
}

// reload fences the cell at a committed reload: qualification, its lease,
// the cohort and the probe baseline go; hard state and the numeric
// evidence stay (a reload creates no failure provenance and erases none).
func (c *cell) reload(at int64) {
	c.fence = max(c.fence, at)
	c.revoke()
	c.probeOK = false
	c.probeRTT = 0
	c.perf = nil
	c.degraded = 0
}

// rx publishes eligible business RX from reporter id at at.
func (c *cell) rx(at int64, id uint64) {
	if at <= c.fence {
		return
	}
	if c.cohortN > 0 && c.cohortAt-at >= int64(CohortGap) {
		return // flushed late, across the cohort's expired support
	}
	if c.cohortN > 0 && at-c.cohortAt >= int64(CohortGap) {
		c.cohortN = 0
	}
	known := false
	for _, x := range c.cohort[:c.cohortN] {
		known = known || x == id
	}
	if !known && int(c.cohortN) < Reporters {
		c.cohort[c.cohortN] = id
		c.cohortN++
	}
	c.cohortAt = max(c.cohortAt, at)
	if c.hard && int(c.cohortN) == Reporters {
		c.hard = false
		c.earned = true
	}
	if c.earned && !c.hard {
		c.lease = max(c.lease, at+int64(Lease))
	}
}

// complete records a useful completion at at whose latest eligible RX was
// at lastRX.
func (c *cell) complete(at, lastRX int64) {
	c.ev.add(successes, at, 1)
	if lastRX <= c.fence || at <= c.fence {
		return
	}
	c.completions++
	if !c.hard && c.completions >= Qualify {
		c.earned = true
	}
	if c.earned && !c.hard {
		c.lease = max(c.lease, at+int64(Lease))
	}
}

func (c *cell) qualified(now int64) bool { return c.earned && !c.hard && now < c.lease }

func (c *cell) usable(now int64) bool {
	return int(c.cohortN) == Reporters && now-c.cohortAt < int64(CohortGap)
}

// probe records a configured-probe observation started at started. One
// started at or before the fence (a node failure, a reload) is of an old
// generation and is dropped; a failed probe invalidates the slot.
func (c *cell) probe(started int64, rtt time.Duration, ok bool) {
	if started <= c.fence {
		return
	}
	c.probeStarted, c.probeRTT, c.probeOK = started, rtt, ok
	if !ok {
		c.probeRTT = 0
	}
}

func (c *cell) probeValid() bool { return c.probeOK && c.probeStarted > c.fence }
