// Package wireguard is the WireGuard outbound: a userspace WireGuard device
// with its own network stack, brought up by the first flow and kept in a
// slot for every flow of the outbound version. The stack (stack.go) is the
// WireGuard device's TUN device: a gVisor stack that may be closed while
// its flows and timers still emit packets. TCP flows are connections of
// that stack; UDP flows are its datagram endpoints, each packet going to
// its own address inside the tunnel.
package wireguard

import (
	"context"
	"log/slog"
	"net"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// Outbound sends flows through one WireGuard peer.
type Outbound struct {
	cfg     *settings
	dialer  *netx.Dialer
	servers netx.Resolver
	res     *resolver
	log     *slog.Logger
	slot    *slot
	now     func() time.Time
	// connectTimeout bounds one TCP connect inside the tunnel.
	connectTimeout time.Duration
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds the outbound: it decodes the keys and the configuration, and
// opens nothing. The first flow starts the tunnel.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	cfg, err := newSettings(o)
	if err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	servers, destinations := deps.Servers, deps.Destinations
	if servers == nil {
		servers = netx.SystemResolver{}
	}
	if destinations == nil {
		destinations = netx.SystemResolver{}
	}
	dialer := deps.Dialer
	if dialer == nil {
		dialer = netx.NewDialer(netx.SocketPolicy{}, 0)
	}
	out := &Outbound{
		cfg:            cfg,
		dialer:         dialer,
		servers:        servers,
		res:            &resolver{r: destinations, strategy: cfg.strategy, families: cfg.families},
		log:            log,
		now:            time.Now,
		connectTimeout: connectAttemptTimeout,
	}
	out.slot = &slot{start: out.startTunnel, now: out.clock, log: log}
	return out, nil
}

// clock reads the outbound's time source; tests replace it.
func (o *Outbound) clock() time.Time { return o.now() }

// startTunnel starts a device with the tunnel's socket made under the
// socket policy. The dial that starts it takes its admission permit first;
// flows inside a running tunnel are logical and pass.
func (o *Outbound) startTunnel(ctx context.Context) (*tunnel, error) {
	if err := netx.Admit(ctx); err != nil {
		return nil, err
	}
	netx.Mark(ctx, netx.PhaseTunnel)
	listen := func(f netx.Family) (udpSocket, error) {
		c, err := o.dialer.ListenUDP(context.Background(), f)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return startTunnel(ctx, o.cfg, o.servers, listen, o.clock, o.log)
}

// DialStream connects to f.Dst inside the tunnel: it returns once the TCP
// handshake through the tunnel is done.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	t, err := o.slot.acquire(ctx)
	if err != nil {
		return nil, err
	}
	addrs, err := o.res.candidates(ctx, f.Dst)
	if err != nil {
		return nil, err
	}
	netx.Mark(ctx, netx.PhaseConnect)
	return connect(ctx, t, addrs, o.connectTimeout)
}

// DialPacket opens a UDP link inside the tunnel. Each datagram names its
// own destination; f.Dst is not used.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	t, err := o.slot.acquire(ctx)
	if err != nil {
		return nil, err
	}
	return listenPacket(t, o.res, o.clock, o.log)
}

// CarriesUDP reports true: each datagram goes to its own peer inside the
// tunnel (outbound.Networks).
func (o *Outbound) CarriesUDP() bool { return true }

// Close stops the tunnel and ends every flow that rides it; later dials
// fail. It is idempotent.
func (o *Outbound) Close() error { return o.slot.Close() }
