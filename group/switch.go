package group

import "switchyard/netx"

// SwitchReason is why a group's effective member changed (Options.OnSwitch).
type SwitchReason string

const (
	// SwitchManual: a Selector's choice was written (Select).
	SwitchManual SwitchReason = "manual"
	// SwitchLatency: a URLTest ranked another member lower beyond the
	// tolerance (or the incumbent was unmeasured).
	SwitchLatency SwitchReason = "lower_latency"
	// SwitchStrikes: a URLTest left an incumbent carrying dial-failure
	// strikes.
	SwitchStrikes SwitchReason = "strikes"
	// SwitchUnavailable: the old member is no longer eligible (a URLTest
	// winner or a Fallback pin that died or was excluded).
	SwitchUnavailable SwitchReason = "unavailable"
)

// switched tells OnSwitch that g moved on network for reason.
func (m *Manager) switched(g *grp, net int, reason SwitchReason) {
	if m.o.OnSwitch != nil {
		m.o.OnSwitch(g.tag, netx.Network(net), reason)
	}
}

// switchReason is why a URLTest re-rank moved its winner away from the
// incumbent it ranked against.
func switchReason(rk *ranking) SwitchReason {
	switch {
	case !rk.incEligible:
		return SwitchUnavailable
	case rk.incStrikes > 0:
		return SwitchStrikes
	}
	return SwitchLatency
}
