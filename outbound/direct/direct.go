// Package direct is the outbound that connects to the destination itself
// (freedom): TCP by sequential connect over the resolved addresses, UDP over
// one socket per address family.
package direct

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"syscall"

	"switchyard/netx"
	"switchyard/outbound"
)

// Outbound is a direct outbound.
type Outbound struct {
	dialer   *netx.Dialer
	resolver netx.Resolver
	strategy netx.Strategy
	log      *slog.Logger
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds a direct outbound; it opens nothing.
func New(strategy netx.Strategy, deps outbound.Deps) *Outbound {
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Outbound{dialer: deps.Dialer, resolver: deps.Destinations, strategy: strategy, log: log}
}

// DialStream resolves the destination under the address-family strategy and
// connects to the first address that answers. Its failures are the
// target's (netx.FaultTargetRefused for a refused connect, otherwise
// netx.FaultTargetPath): a direct flow has no proxy between this host and
// the target; a local refusal (dial admission) and a cancellation keep
// their own meaning.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	addrs, err := netx.Resolve(ctx, f.Dst, o.strategy, o.resolver)
	if err != nil {
		return nil, targetFault(ctx, err)
	}
	c, err := o.dialer.ConnectAny(ctx, addrs)
	if err != nil {
		return nil, targetFault(ctx, err)
	}
	return c, nil
}

// targetFault marks a failure of a direct dial as the target's, unless it
// already names its fault or the dial was cancelled.
func targetFault(ctx context.Context, err error) error {
	if f, _ := netx.FaultOf(err); f != netx.FaultNone || errors.Is(err, context.Canceled) || ctx.Err() == context.Canceled {
		return err
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return netx.WithFault(err, netx.FaultTargetRefused)
	}
	return netx.WithFault(err, netx.FaultTargetPath)
}

// CarriesUDP reports true: a direct outbound sends datagrams itself
// (outbound.Networks).
func (o *Outbound) CarriesUDP() bool { return true }

// DialPacket binds one UDP socket per family the strategy allows.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	u, err := o.dialer.BindDual(ctx, o.families(), o.log)
	if err != nil {
		return nil, err
	}
	return newResolvingUDP(u, o.resolver, o.strategy, o.log), nil
}

func (o *Outbound) families() []netx.Family {
	switch o.strategy {
	case netx.IPv4Only:
		return []netx.Family{netx.V4}
	case netx.IPv6Only:
		return []netx.Family{netx.V6}
	}
	return []netx.Family{netx.V4, netx.V6}
}
