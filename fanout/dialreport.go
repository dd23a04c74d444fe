package fanout

import (
	"context"

	"switchyard/netx"
	"switchyard/plane"
)

// A DialReporter is a Reporter that also hears every sub-link open, for
// metrics: the leaf, the establishment phase running when the open
// returned, its error (nil: opened) and whether the association's end
// abandoned it. It is called on the open's goroutine and must not block.
type DialReporter interface {
	PacketDialed(leaf *plane.Target, phase netx.Phase, err error, abandoned bool)
}

// reportDial tells a DialReporter of one sub-link open under est.
func (l *Link) reportDial(ctx context.Context, leaf *plane.Target, est *netx.Establishment, err error) {
	if d, ok := l.report.(DialReporter); ok {
		d.PacketDialed(leaf, est.Phase(), err, ctx.Err() != nil)
	}
}

// reportPhase tells a DialReporter of one open of a cold preparation's
// candidate that ended in phase (a winner, err nil, or a failure the
// preparation observed: neither abandoned nor cancelled).
func (l *Link) reportPhase(leaf *plane.Target, phase netx.Phase, err error) {
	if d, ok := l.report.(DialReporter); ok {
		d.PacketDialed(leaf, phase, err, false)
	}
}
