package supervisor

// The Score engine is process-wide (group/score): made with the
// supervisor, given to every generation's group manager, configured with
// the Score groups of each published generation, fed by the health
// engine's probes and deaths, and read by the API and the metrics through
// the published manager (group.Manager.ScoreStats).

import (
	"time"

	"switchyard/group"
	"switchyard/group/score"
	"switchyard/health"
	"switchyard/netx"
)

// scoreClock is the Score engine's clock: the health engine's in tests,
// the wall clock otherwise.
func (sv *Supervisor) scoreClock() score.Clock {
	if sv.opts.clock != nil {
		return sv.opts.clock
	}
	return wallClock{}
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// configureScore configures the Score engine with the Score groups of the
// manager being published (none without groups). Called under publishMu,
// before the plane that routes to the manager is stored: a flow of the
// new plane ranks against the new membership.
func (sv *Supervisor) configureScore(next *group.Manager) {
	if sv.score == nil {
		return
	}
	now := sv.scoreClock().Now()
	if next != nil {
		next.ConfigureScore(now)
		return
	}
	sv.score.Configure(now, nil)
}

// observer is the health engine's observer: the metrics' (or none)
// with the Score engine fed too, probing every interval.
func (sv *Supervisor) observer(interval time.Duration) health.Observer {
	if sv.score == nil {
		return sv.healthObserver()
	}
	if interval <= 0 {
		interval = health.DefaultCheckInterval
	}
	return scoreObserver{next: sv.healthObserver(), score: sv.score, interval: interval, now: sv.scoreClock().Now}
}

// scoreFeed is what health tells the Score engine (*score.Engine).
type scoreFeed interface {
	Probe(network netx.Network, node health.NodeID, started time.Time, rtt time.Duration, ok bool, interval time.Duration)
	NodeDown(node health.NodeID, at time.Time)
}

// scoreObserver is the health engine's observer with the Score engine fed
// too: every TCP probe result of a node (the engine keeps those of its
// Score groups' members) with the probe interval, and a node's TCP death
// as an authoritative health exclusion.
//
// The UDP health probe (one DNS query) is not Score evidence: Score's UDP
// probe quality is the Score QUIC evidence handshake alone (scorequic.go),
// a separate DataUdp measurement. A DNS round trip to udp_check_dns is
// another request to another server; pooling it with the handshake's
// durations in one probe cohort would mix measurement scopes, and a
// failed DNS query would fail a slot the handshake may have just proven.
type scoreObserver struct {
	next     health.Observer // the metrics, or nil
	score    scoreFeed
	interval time.Duration
	now      func() time.Time
}

func (o scoreObserver) Transition(id health.NodeID, name string, d health.Domain, f netx.Family, alive bool) {
	if !alive && d == health.TCP {
		o.score.NodeDown(id, o.now())
	}
	if o.next != nil {
		o.next.Transition(id, name, d, f, alive)
	}
}

func (o scoreObserver) Probed(id health.NodeID, name string, d health.Domain, f netx.Family, rtt time.Duration, err error) {
	if d == health.TCP {
		now := o.now()
		o.score.Probe(netx.TCP, id, now.Add(-rtt), rtt, err == nil, o.interval)
	}
	if o.next != nil {
		o.next.Probed(id, name, d, f, rtt, err)
	}
}

// ScoreStats are the Score engine's counters named by the published
// manager's groups (metrics.ScoreSource); empty without groups.
func (sv *Supervisor) ScoreStats() group.ScoreStats {
	if m := sv.groups.Load(); m != nil {
		return m.ScoreStats()
	}
	return group.ScoreStats{Groups: []group.ScoreGroupStats{}}
}
