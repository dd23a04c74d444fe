package wireguard

import (
	"context"

	"switchyard/internal/slot"
	"switchyard/outbound"
)

var _ outbound.Warmer = (*Outbound)(nil)

// Warm brings the tunnel up without a flow (outbound.Warmer): a tunnel
// already up is left as it is; keep makes no difference, the tunnel stays
// until it dies or is purged. opened reports whether a new tunnel came up.
func (o *Outbound) Warm(ctx context.Context, _ bool) (opened bool, err error) {
	before := o.tunnels.slot.State().Gen
	r, err := o.tunnels.acquire(ctx)
	if err != nil {
		return false, err
	}
	r.Release()
	return r.Gen != before, nil
}

// Cool lets the tunnel go when no flow rides it: the next flow starts a
// new one. A tunnel in use is kept.
func (o *Outbound) Cool() {
	if o.tunnels.slot.State().Holds == 0 {
		o.tunnels.slot.Purge()
	}
}

// Warmth reads whether the tunnel is up.
func (o *Outbound) Warmth() outbound.Warmth {
	return outbound.Warmth{Kind: outbound.WarmSession, Up: o.tunnels.slot.State().Phase == slot.Up}
}
