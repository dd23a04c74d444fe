package health

import (
	"context"
	"errors"
	"fmt"
	"time"

	"switchyard/netx"
)

// ReportDial reports one real dial of node id over family f, from the data
// path: its latency, whether it was a ready-pool hit (pooled: no network
// round trip, so it stays out of the latency EMA), and its error. A
// cancelled dial (context.Canceled) says nothing and is ignored.
//
// A failure counts as a real-traffic TCP failure (death at
// TrafficFailuresTCP in a row); every second consecutive failure appends a
// synthetic 10 s placeholder to the TCP history and adds one failure
// strike. A success resets the failure streak and the real-traffic count;
// a fresh success also feeds the EMA, and the third consecutive slow one
// adds one strike and fires an emergency probe of the node. Strikes clear
// after max(strikes, 2) consecutive real successes that were not slow.
// Dial latencies never enter the probe moving average.
func (e *Engine) ReportDial(id NodeID, f netx.Family, latency time.Duration, pooled bool, err error) {
	if err != nil && errors.Is(err, context.Canceled) {
		return
	}
	n := e.node(id)
	if n == nil {
		return
	}
	f &= 1
	emergency := false
	e.mutate(n, func(now time.Time, ts []transition) []transition {
		s, c := &n.dial, &n.cells[TCP][f]
		if err != nil {
			s.failStreak++
			s.goodStreak = 0
			if s.failStreak%DialFailuresPerStrike == 0 {
				c.record(now, SyntheticDelay, true)
				s.failStrikes++
				e.log.Debug(fmt.Sprintf("node %s: %d consecutive dial failures, strike %d", n.name(), s.failStreak, s.strikes()))
			}
			var dying [3]bool
			dying[TCP] = c.trafficFail(TrafficFailuresTCP, n.counts(now, false))
			return e.killLocked(n, now, f, dying, trafficCause[TCP], ts)
		}
		s.failStreak = 0
		c.trafficOK(now)
		if !pooled {
			ema := s.ema
			if s.fresh(latency) {
				s.goodStreak = 0
				s.slowStreak++
				if s.slowStreak >= SlowDials {
					s.slowStreak = 0
					s.slowStrikes++
					s.probeOK = 0
					emergency = true
					e.log.Info(fmt.Sprintf("node %s: %d consecutive dials slower than %v (dial EMA %v), strike %d, emergency probe",
						n.name(), SlowDials, slowAbove(ema), ema, s.strikes()))
				}
				return ts
			}
			s.slowStreak = 0
		}
		s.goodStreak++
		if k := s.strikes(); k > 0 && s.goodStreak >= max(k, RecoverySuccesses) {
			s.failStrikes, s.slowStrikes, s.probeOK, s.goodStreak = 0, 0, 0, 0
			e.log.Debug(fmt.Sprintf("node %s: %d consecutive real successes, strikes cleared", n.name(), k))
		}
		return ts
	})
	if emergency {
		e.urgent([]NodeID{id}, urgentTCP)
	}
}

// ReportTraffic reports one real flow outcome of domain d of node id over
// family f, from the data path. A failure counts toward the real-traffic
// threshold of the domain (TCP 10, DnsUdp 3, DataUdp 50 in a row; a UDP
// domain does not die while its sibling is explicitly alive); a success
// resets that count. Real traffic never revives a dead state (probes do),
// but a success makes its recovery probe due at once. Neutral outcomes
// (cancellation, capacity refusals, idle expiry after a reply, shutdown)
// must not be reported.
func (e *Engine) ReportTraffic(id NodeID, d Domain, f netx.Family, ok bool) {
	n := e.node(id)
	if n == nil || int(d) >= len(Domains) {
		return
	}
	f &= 1
	e.mutate(n, func(now time.Time, ts []transition) []transition {
		c := &n.cells[d][f]
		if ok {
			c.trafficOK(now)
			return ts
		}
		var dying [3]bool
		dying[d] = c.trafficFail(trafficThreshold[d], n.counts(now, false))
		return e.killLocked(n, now, f, dying, trafficCause[d], ts)
	})
}

// NotifyNetworkChange reports a relevant link, address or route change
// (WatchNetwork calls it): stale cooldowns and probe failure counts are
// cleared, dead states are primed so one fresh probe success verifies
// their recovery, and every node and check_url is probed at once.
func (e *Engine) NotifyNetworkChange() {
	for _, n := range *e.reg.Load() {
		n.mu.Lock()
		for d := range n.cells {
			for f := range n.cells[d] {
				n.cells[d][f].networkChanged()
			}
		}
		n.mu.Unlock()
	}
	for _, u := range *e.urls.Load() {
		u.mu.Lock()
		u.c.networkChanged()
		u.mu.Unlock()
	}
	e.log.Info("network changed: cooldowns cleared, dead states primed, probing every node")
	e.urgentEverything()
}
