package health

import (
	"context"
	"fmt"
	"time"
)

// Death causes, as the state-change log lines give them.
var (
	probeCause   = fmt.Sprintf("%d probe failures", ProbeFailures)
	trafficCause = [...]string{
		TCP:     fmt.Sprintf("%d real-traffic failures", TrafficFailuresTCP),
		DNSUDP:  fmt.Sprintf("%d real-traffic failures", TrafficFailuresDNSUDP),
		DataUDP: fmt.Sprintf("%d real-traffic failures", TrafficFailuresDataUDP),
	}
	trafficThreshold = [...]int{
		TCP:     TrafficFailuresTCP,
		DNSUDP:  TrafficFailuresDNSUDP,
		DataUDP: TrafficFailuresDataUDP,
	}
)

// probeTCP measures the TCP path of n once and records the outcome;
// forced probes (asked for by an operator) count their failures even in
// the grace. The UDP path is a round of its own (submitUDP).
func (e *Engine) probeTCP(ctx context.Context, n *node, forced bool) {
	m := n.meta.Load()
	if m.prober == nil {
		return
	}
	pctx, cancel := e.withTimeout(ctx, e.timeout)
	res, err := m.prober.TCP(pctx, e.url, e.method)
	cancel()
	if ctx.Err() != nil {
		return // cancelled: the result says nothing about the node
	}
	e.probed(n, tcpPath, res, err)
	e.recordTCP(n, res, err, forced)
}

// rtt is a success's round trip, never zero (zero marks a failure).
func rtt(r Result) time.Duration { return max(r.RTT, time.Microsecond) }

// recordTCP applies one TCP probe outcome: a success enters the TCP state
// of the family the result names (history, average, recovery, the last
// real sample) and counts toward clearing a slow-dial strike; a failure
// updates liveness and cooldown of the family the error names, never a
// latency or a strike.
func (e *Engine) recordTCP(n *node, res Result, err error, forced bool) {
	e.mutate(n, func(now time.Time, ts []transition) []transition {
		if err != nil {
			f := familyOf(err)
			n.dial.probeOK = 0
			counts := n.counts(now, forced)
			var dying [3]bool
			dying[TCP] = n.cells[TCP][f].probeFail(now, counts)
			if !counts {
				e.log.Debug(fmt.Sprintf("node %s tcp/%s probe failed within the %v grace (not counted): %v", n.name(), f, Grace, err))
			}
			return e.killLocked(n, now, f, dying, probeCause, ts)
		}
		f, d := res.Family&1, rtt(res)
		if n.cells[TCP][f].probeOK(now, d) == revived {
			ts = append(ts, transition{n: n, d: TCP, f: f, what: revived})
		}
		n.last, n.has = Sample{Time: now, Delay: d, Family: f}, true
		if s := &n.dial; s.slowStrikes > 0 {
			s.probeOK++
			if s.probeOK >= max(s.slowStrikes, RecoverySuccesses) {
				s.slowStrikes, s.probeOK = 0, 0
				e.log.Debug(fmt.Sprintf("node %s: probes succeed again, slow-dial strikes cleared", n.name()))
			}
		}
		return ts
	})
}

// recordUDP applies one UDP round: a DNS success records the RTT into
// both UDP domains of its family and counts as a success of each; a DNS
// failure adds one probe failure to each, except that a Score QUIC
// handshake that succeeded in the same round (quic, nil when none did)
// keeps DataUdp of its family from failing and counts as a probe success
// of it, without a latency sample (its duration is Score's evidence, never
// the UDP average). TCP is never touched.
func (e *Engine) recordUDP(n *node, res Result, err error, forced bool, quic *Result) {
	e.mutate(n, func(now time.Time, ts []transition) []transition {
		if err != nil {
			f := familyOf(err)
			counts := n.counts(now, forced)
			var dying [3]bool
			dying[DNSUDP] = n.cells[DNSUDP][f].probeFail(now, counts)
			if quic != nil {
				qf := quic.Family & 1
				if n.cells[DataUDP][qf].probeAlive(now) == revived {
					ts = append(ts, transition{n: n, d: DataUDP, f: qf, what: revived})
				}
				e.log.Debug(fmt.Sprintf("node %s dns_udp/%s probe failed, data_udp/%s answered the QUIC handshake: %v", n.name(), f, qf, err))
			}
			if quic == nil || quic.Family&1 != f {
				dying[DataUDP] = n.cells[DataUDP][f].probeFail(now, counts)
			}
			if !counts {
				e.log.Debug(fmt.Sprintf("node %s udp/%s probe failed within the %v grace (not counted): %v", n.name(), f, Grace, err))
			}
			return e.killLocked(n, now, f, dying, probeCause, ts)
		}
		f, d := res.Family&1, rtt(res)
		for _, dom := range Domains[1:] {
			if n.cells[dom][f].probeOK(now, d) == revived {
				ts = append(ts, transition{n: n, d: dom, f: f, what: revived})
			}
		}
		return ts
	})
}
