package supervisor

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"switchyard/fanout"
	"switchyard/inbound"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// connector routes every flow on the plane current when it arrives and opens
// it: a TCP flow is dialed, guarded by its outbound version and tracked; a
// UDP association becomes a fan-out link that routes each packet itself.
type connector struct {
	cell    *plane.Cell
	tracker *track.Tracker
	log     *slog.Logger
}

var _ inbound.Connector = (*connector)(nil)

func (c *connector) ConnectStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	p := c.cell.Load()
	target, rule := p.Route(&f)
	leaf := target.Resolve(nil)
	conn, err := leaf.DialStream(ctx, f)
	if err != nil {
		c.log.Debug("flow failed", "inbound", f.Inbound, "source", f.Src, "destination", f.Dst, "rule", plane.RuleName(rule), "outbound", leaf.ID().String(), "error", err)
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
	}
	return c.tracker.Conn(meta, conn), nil
}

func (c *connector) OpenAssociation(f netx.Flow) netx.PacketLink {
	f.Network = netx.UDP
	return fanout.New(c.cell, f, c.tracker, c.log)
}
