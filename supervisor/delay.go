package supervisor

import (
	"context"
	"fmt"
	"time"

	"switchyard/health"
	"switchyard/health/probe"
)

// DelayTest measures one outbound of the published plane as a delay test
// does (method health.DelayMethod to url, the RTT of the second request),
// for outbounds the health engine does not hold: those no group reaches.
// It records nothing; the engine's nodes are measured through
// health.Engine.Delay, which keeps their history. url "" is
// health.DefaultDelayURL; timeout bounds the whole test.
func (sv *Supervisor) DelayTest(ctx context.Context, tag, url string, timeout time.Duration) (health.Result, error) {
	p := sv.cell.Load()
	if p == nil {
		return health.Result{}, fmt.Errorf("%q: %w", tag, ErrUnknownTag)
	}
	t := p.Targets[tag]
	if t == nil || t.Outbound() == nil {
		return health.Result{}, fmt.Errorf("%q: %w", tag, ErrUnknownTag)
	}
	if url == "" {
		url = health.DefaultDelayURL
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	pr := probe.New(t.Outbound(), probe.Options{Log: sv.log.With("component", "probe", "node", tag)})
	return pr.TCP(ctx, url, health.DelayMethod)
}
