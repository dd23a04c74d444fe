package hysteria2

import (
	"context"

	"switchyard/internal/slot"
	"switchyard/outbound"
)

var _ outbound.Warmer = (*Outbound)(nil)

// Warm brings the QUIC connection up without a flow (outbound.Warmer): a
// connection already up is left as it is; keep makes no difference, the
// connection stays until it dies or is purged. opened reports whether a
// new connection came up.
func (o *Outbound) Warm(ctx context.Context, _ bool) (opened bool, err error) {
	before := o.slot.State().Gen
	r, err := o.slot.Acquire(ctx)
	if err != nil {
		return false, err
	}
	r.Release()
	return r.Gen != before, nil
}

// Cool lets the QUIC connection go when no stream or UDP session is open
// on it: the next flow brings a new one up. One in use is kept.
func (o *Outbound) Cool() {
	if o.slot.State().Holds == 0 {
		o.slot.Purge()
	}
}

// Warmth reads whether the QUIC connection is up.
func (o *Outbound) Warmth() outbound.Warmth {
	return outbound.Warmth{Kind: outbound.WarmSession, Up: o.slot.State().Phase == slot.Up}
}
