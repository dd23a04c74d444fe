package score

import "time"

// Layer is one evidence layer of a View, read at the View's time. Counts
// are decayed; none of them is an identity.
type Layer struct {
	// Present reports that the layer's cell exists; an absent layer reads
	// as zero.
	Present bool
	// Attempts are begun business flows; Successes useful completions;
	// Failures every failure, SetupFailures the subset before setup.
	Attempts, Successes, Failures, SetupFailures float64
	// Hard reports an open hard failure episode.
	Hard bool
	// Qualified reports current qualification: earned (four effective
	// useful completions since the last failure or reload, or recovery
	// by four reporters) and within its lease.
	Qualified bool
	// LeaseUntil is when the qualification lease ends (zero: none).
	LeaseUntil time.Time
	// Usable reports recent usability: four distinct reporters with
	// eligible business RX in the current availability cohort, the
	// latest less than CohortGap ago.
	Usable bool
}

// Probe is the node's configured-probe slot in the global aggregate.
type Probe struct {
	RTT   time.Duration
	Valid bool // measured, not failed, and started after the node's failure and reload fences
}

// View is a blended read of one Scope's evidence.
type View struct {
	Global, Family, Exact Layer
	// Rate is the blended posterior mean of success, Lower and Upper its
	// Beta confidence bounds. The blend moves global → family → exact by
	// each layer's own decayed outcomes (BlendThreshold).
	Rate, Lower, Upper float64
	// Support is the largest of the layers' separately decayed success
	// counts, never their sum.
	Support float64
	Probe   Probe
}

// decayMemo is one view's latest decay factor: a node's layers usually
// share their latest event time (one flow's event reaches all three),
// so a view costs one exponential instead of three. The factor depends
// only on the event time, so the result is the same as an unshared read.
type decayMemo struct {
	at  int64
	f   float64
	set bool
}

// factor is the decay factor from event time at to now.
func (m *decayMemo) factor(at, now int64) float64 {
	if !m.set || m.at != at {
		m.at, m.f, m.set = at, decayFactor(now-at), true
	}
	return m.f
}

// layerMemo writes cell c's Layer at now into l (nil: the zero Layer),
// with a view's shared decay factor m.
func layerMemo(l *Layer, c *cell, now int64, m *decayMemo) {
	if c == nil {
		*l = Layer{}
		return
	}
	v := c.ev.scaled(m.factor(c.ev.at, now))
	*l = Layer{
		Present:       true,
		Attempts:      v[attempts],
		Successes:     v[successes],
		Failures:      v[failures],
		SetupFailures: v[setupFails],
		Hard:          c.hard,
		Qualified:     c.qualified(now),
		Usable:        c.usable(now),
	}
	if c.lease != 0 {
		l.LeaseUntil = time.Unix(0, c.lease)
	}
}

func (l Layer) counts() counts {
	return counts{s: l.Successes, f: l.Failures + (SetupFailureWeight-1)*l.SetupFailures}
}

// layerRank writes cell c's Layer at now into l field by field, leaving
// LeaseUntil as it is (a rank's pooled views keep it zero: a rank never
// reads it). It stores no pointer, so a rank's batched read takes no
// write barrier.
func layerRank(l *Layer, c *cell, now int64, m *decayMemo) {
	if c == nil {
		l.Present, l.Hard, l.Qualified, l.Usable = false, false, false, false
		l.Attempts, l.Successes, l.Failures, l.SetupFailures = 0, 0, 0, 0
		return
	}
	v := c.ev.scaled(m.factor(c.ev.at, now))
	l.Present, l.Hard, l.Qualified, l.Usable = true, c.hard, c.qualified(now), c.usable(now)
	l.Attempts, l.Successes, l.Failures, l.SetupFailures = v[attempts], v[successes], v[failures], v[setupFails]
}

func newView(g, f, e *cell, now int64) View {
	var v View
	viewInto(&v, g, f, e, now)
	return v
}

// viewInto is newView written in place.
func viewInto(v *View, g, f, e *cell, now int64) {
	var m decayMemo
	layerMemo(&v.Global, g, now, &m)
	layerMemo(&v.Family, f, now, &m)
	layerMemo(&v.Exact, e, now, &m)
	blendInto(v, g)
}

// rankViewInto is a rank's batched read of one view in place: viewInto
// without the layers' LeaseUntil (see layerRank).
func rankViewInto(v *View, g, f, e *cell, now int64) {
	var m decayMemo
	layerRank(&v.Global, g, now, &m)
	layerRank(&v.Family, f, now, &m)
	layerRank(&v.Exact, e, now, &m)
	blendInto(v, g)
}

// blendInto fills v's blended rate, bounds, support and probe from its
// layers and the global cell g.
func blendInto(v *View, g *cell) {
	c := blend(blend(v.Global.counts(), v.Family.counts()), v.Exact.counts())
	v.Rate, v.Lower, v.Upper = bounds(c)
	v.Support = max(v.Global.Successes, v.Family.Successes, v.Exact.Successes)
	v.Probe = Probe{}
	if g != nil {
		v.Probe.Valid = g.probeValid()
		if v.Probe.Valid {
			v.Probe.RTT = g.probeRTT
		}
	}
}
