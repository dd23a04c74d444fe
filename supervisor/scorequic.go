package supervisor

// The Score QUIC evidence probe: in every UDP round of a node some Score
// group can select, health performs a TLS-in-QUIC handshake (ALPN h3)
// through the node toward the first [health].tcp_check_url when it is
// https, and hands its duration to the Score engine as the node's UDP
// probe quality. The supervisor tells health which nodes are Score leaves
// at every reload, and forwards the results.

import (
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// scoreQUIC is the health engine's OnScoreQUIC: a handshake of a Score
// leaf is a UDP probe of the Score engine, at the probe interval. It never
// reaches a flow's evidence (no attempt, no throughput).
func (sv *Supervisor) scoreQUIC(interval time.Duration) func(health.NodeID, time.Time, time.Duration, bool) {
	if sv.score == nil {
		return nil
	}
	return scoreQUICFeed(sv.score, interval)
}

func scoreQUICFeed(feed scoreFeed, interval time.Duration) func(health.NodeID, time.Time, time.Duration, bool) {
	if interval <= 0 {
		interval = health.DefaultCheckInterval
	}
	return func(id health.NodeID, started time.Time, rtt time.Duration, ok bool) {
		feed.Probe(netx.UDP, id, started, rtt, ok, interval)
	}
}

// scoreLeaves are the nodes st's Score groups can select, finals
// included; none without groups.
func scoreLeaves(st *state) []health.NodeID {
	if st.groups == nil {
		return nil
	}
	var ids []health.NodeID
	for _, g := range st.groups.ScoreGroups() {
		for _, l := range g.Leaves {
			ids = append(ids, l.Node)
		}
	}
	return ids
}
