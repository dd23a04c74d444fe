package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"switchyard/fanout"
	"switchyard/group/score"
	"switchyard/inbound"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/relay"
	"switchyard/track"
)

// connector routes every flow on the plane current when it arrives and opens
// it: a TCP flow is dialed, guarded by its outbound version and tracked; a
// UDP association becomes a fan-out link that routes each packet itself.
type connector struct {
	cell    *plane.Cell
	tracker *track.Tracker
	log     *slog.Logger
	// ended, when set, hears how each relayed TCP flow ended, with the
	// flow's meta (its chain included): Options.FlowEnded.
	ended func(track.Meta, relay.End)
	// health hears every real dial and how each flow ended.
	health healthReports
	// metrics counts every real dial (metrics.go).
	metrics dialMetrics
}

var _ inbound.Connector = (*connector)(nil)

// ConnectStream dials f under the establishment of the plane it routes on:
// one absolute deadline and that generation's admission. A dial that a
// reload overtook (its version retired before it began, or drained while it
// ran, or its Score plan refused as stale by the reload's new serving
// pools) is routed and dialed again on the plane published since, for as long
// as the first try's establishment deadline runs: a flow never fails
// because a reload happened, and a storm of reloads cannot hold it longer
// than a silent server could.
func (c *connector) ConnectStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	p := c.cell.Load()
	if p.FakeIPs != nil {
		dst, err := p.Unfake(f.Dst)
		if err != nil {
			c.log.Warn("flow refused", "inbound", f.Inbound, "source", f.Src, "destination", f.Dst, "error", err)
			return nil, err
		}
		f.Dst = dst
	}
	until := time.Now().Add(p.EstablishTimeout())
	conn, sf, leaf, rule, chain, err := c.dial(ctx, p, f)
	for err != nil && (plane.Reloaded(err) || errors.Is(err, score.ErrStalePlan)) && ctx.Err() == nil && time.Now().Before(until) {
		q := c.cell.Load()
		if q == p {
			break
		}
		p = q
		conn, sf, leaf, rule, chain, err = c.dial(ctx, p, f)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", leaf.ID(), err)
	}
	meta := track.Meta{
		Network:     netx.TCP,
		Inbound:     f.Inbound,
		User:        f.User,
		Source:      f.Src,
		Destination: f.Dst,
		Sniffed:     f.Sniffed,
		Rule:        plane.RuleName(rule),
		Outbound:    leaf.ID().String(),
		Epoch:       p.Epoch,
		Session:     f.Session,
		Chain:       chain,
	}
	fam := familyOf(leaf.Outbound(), conn)
	return c.tracker.Conn(meta, watchScore(conn, sf), track.OnEnd(func(e relay.End) {
		if sf != nil {
			sf.relayEnded(time.Now(), e)
		}
		c.health.ended(leaf, fam, e)
		if c.ended != nil {
			c.ended(meta, e)
		}
	})), nil
}

// dial routes f on p and dials its leaf under one establishment, listed in
// the tracker as a dial in progress while it runs. chain is the selection
// chain the routing took (plane.Query.Path); sf the flow's begun Score
// reports (nil: none).
func (c *connector) dial(ctx context.Context, p *plane.Plane, f netx.Flow) (conn net.Conn, sf *scoreFlow, leaf *plane.Target, rule int, chain []string, err error) {
	target, rule := p.Route(&f)
	p.Hit(rule)
	var q plane.Query
	q.Network, q.Dst = netx.TCP, f.Dst
	leaf = target.Resolve(&q)
	if leaf == nil {
		q.Attempts.Release(time.Now())
		return nil, nil, target, rule, nil, plane.ErrNoLeaf
	}
	chain = q.Path()
	pending := c.tracker.BeginDial(track.Meta{
		Network: netx.TCP, Inbound: f.Inbound, User: f.User, Source: f.Src, Destination: f.Dst,
		Sniffed: f.Sniffed, Rule: plane.RuleName(rule), Outbound: leaf.ID().String(), Epoch: p.Epoch,
		Chain: chain,
	})
	defer pending.End()
	est, dctx, cancel := p.Begin(ctx)
	defer cancel()
	var refused bool
	conn, sf, refused, err = c.dialLeaf(ctx, dctx, est, leaf, f, &q)
	if err != nil && !refused && !plane.Reloaded(err) && !localRefusal(err) && ctx.Err() == nil && !est.Expired(dctx) {
		// A URLTest pick that failed to set up gets its one retry round,
		// in order, and a Score pick one different leaf, within the same
		// establishment and admission: no payload was written yet. A
		// local refusal (a block, capacity), the client's leaving, a
		// reload and an expired deadline are terminal.
		for _, next := range target.Retry(&q, leaf) {
			c.log.Debug("flow failed, retrying on the next member", "outbound", leaf.ID().String(), "next", next.ID().String(), "error", err)
			leaf = next
			conn, sf, refused, err = c.dialLeaf(ctx, dctx, est, leaf, f, &q)
			if err == nil || refused || plane.Reloaded(err) || localRefusal(err) || ctx.Err() != nil || est.Expired(dctx) {
				break
			}
		}
		q.Attempts.Release(time.Now())
		if err == nil {
			// The retry's chain: the Score walk recorded its own;
			// URLTest's round replaces the leaf.
			if q.Retry && q.Depth > 0 {
				chain = q.Path()
			} else {
				chain = append(chain[:len(chain)-1:len(chain)-1], leaf.ID().Tag)
			}
		}
	}
	est.End()
	if err != nil {
		attrs := []any{"inbound", f.Inbound, "source", f.Src, "destination", f.Dst, "rule", plane.RuleName(rule), "outbound", leaf.ID().String(), "error", err}
		switch {
		case refused:
			c.log.Debug("flow refused: its plan went stale", attrs...)
		case est.Expired(dctx):
			c.log.Warn("dial timed out", append(attrs, "phase", est.Phase().String(), "deadline", est.Deadline().String())...)
		case context.Cause(dctx) != nil && ctx.Err() != nil:
			c.log.Debug("dial abandoned", append(attrs, "phase", est.Phase().String(), "cause", context.Cause(ctx))...)
		default:
			c.log.Debug("flow failed", attrs...)
		}
	}
	return conn, sf, leaf, rule, chain, err
}

// dialLeaf begins q's Score attempts, dials f on leaf under est, reports
// the dial to health and the metrics and sets the reports up or ends them.
// refused: an attempt's Begin refused the plan (no dial happened, nothing
// is reported to health).
func (c *connector) dialLeaf(ctx, dctx context.Context, est *netx.Establishment, leaf *plane.Target, f netx.Flow, q *plane.Query) (net.Conn, *scoreFlow, bool, error) {
	start := time.Now()
	sf, err := beginScore(q, start)
	if err != nil {
		return nil, nil, true, err
	}
	conn, err := leaf.DialStream(dctx, f)
	c.health.dialed(ctx, leaf, conn, time.Since(start), est.TakePooled(), err)
	c.metrics.dialed(ctx, est, leaf, err)
	if sf != nil {
		sf.dialed(time.Now(), err, err != nil && neutralDialError(ctx, dctx, est, err))
		if err != nil {
			sf = nil
		}
	}
	return conn, sf, false, err
}

func (c *connector) OpenAssociation(f netx.Flow) netx.PacketLink {
	f.Network = netx.UDP
	return fanout.NewReporting(c.cell, f, c.tracker, c.log, packetReports{c.health, c.metrics})
}
