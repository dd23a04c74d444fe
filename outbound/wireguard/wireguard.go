// Package wireguard is the WireGuard outbound: a userspace WireGuard device
// with its own network stack, brought up by the first flow and kept in a
// slot for every flow of the outbound version. The stack (stack.go) is the
// WireGuard device's TUN device: a gVisor stack that may be closed while
// its flows and timers still emit packets. TCP flows are connections of
// that stack; UDP flows are its datagram endpoints, each packet going to
// its own address inside the tunnel.
//
// # Purge
//
// When health finds the node dead, Purge either closes the tunnel, cutting
// the flows inside it, or keeps it whole; it never keeps an old tunnel
// beside a new one. A WireGuard peer keeps one endpoint and one session per
// key: a second device with the same key takes both over at its first
// handshake, so the old tunnel's flows stop working anyway, and while both
// run they steal them back and forth (every authenticated packet moves the
// peer's endpoint, every rekey replaces the other's session). Which of the
// two follows from the tunnel's own evidence, the peer's handshakes:
//
//   - The peer answered no handshake within Reject-After-Time (180 s,
//     counted from the tunnel's start when it never answered): no session
//     key of the tunnel is valid, so its flows carry nothing. The tunnel
//     is closed at once, and with it they stop holding memory, stack
//     endpoints and the socket; the next dial starts a new tunnel, with the
//     endpoint resolved again and a new socket.
//   - The peer answered more recently: the tunnel holds a live session and
//     its flows may be working, the death being a false positive for the
//     tunnel (a probe target or the peer's onward path failing), which a
//     new tunnel would not mend. Nothing is cut. The tunnel stays under
//     suspicion: a dial that finds the peer silent for Reject-After-Time
//     closes and rebuilds it as above, and a handshake answered after the
//     purge clears it.
package wireguard

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"switchyard/internal/slot"
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
	tunnels *tunnels
	now     func() time.Time
	// connectTimeout bounds one TCP connect inside the tunnel.
	connectTimeout time.Duration
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
	_ outbound.Purger   = (*Outbound)(nil)
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
	out.tunnels = newTunnels(out.startTunnel, out.clock, deps.ConnectTimeout, log)
	return out, nil
}

// clock reads the outbound's time source; tests replace it.
func (o *Outbound) clock() time.Time { return o.now() }

// startTunnel starts a device with the tunnel's socket made under the
// socket policy. The dial that starts it has taken its admission permit
// (the slot does); flows inside a running tunnel are logical and pass.
func (o *Outbound) startTunnel(ctx context.Context) (*tunnel, error) {
	listen := func(f netx.Family) (udpSocket, error) {
		c, err := o.dialer.ListenUDP(context.Background(), f)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	return startTunnel(ctx, o.cfg, o.servers, listen, o.log)
}

// DialStream connects to f.Dst inside the tunnel: it returns once the TCP
// handshake through the tunnel is done.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	r, err := o.tunnels.acquire(ctx)
	if err != nil {
		return nil, err
	}
	addrs, err := o.res.candidates(ctx, f.Dst)
	if err != nil {
		r.Release()
		return nil, err
	}
	netx.Mark(ctx, netx.PhaseConnect)
	c, err := connect(ctx, r.V, addrs, o.connectTimeout)
	if err != nil {
		r.Release()
		return nil, err
	}
	return &heldConn{TCPConn: c, t: r.V, release: r.Release}, nil
}

// DialPacket opens a UDP link inside the tunnel. Each datagram names its
// own destination; f.Dst is not used.
//
// A speculative dial (netx.Speculative: a candidate of a cold URLTest UDP
// preparation) rides the tunnel up or starting as any dial does; with
// neither it starts a tunnel of its own, under its own context, which the
// link owns and closes when it closes. Commit, on the winner, makes that
// tunnel the slot's when the slot is still empty (the next flow rides it);
// otherwise the link keeps it alone until it closes.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	r, err := o.tunnels.acquire(ctx)
	if err != nil {
		return nil, err
	}
	l, err := listenPacket(r.V, o.res, o.clock, o.log)
	if err != nil {
		r.Release()
		return nil, err
	}
	l.tun, l.release = r.V, r.Release
	l.commit = func(ctx context.Context) { o.commit(ctx, l, r) }
	return l, nil
}

// commit publishes the tunnel of l, which r holds (packetLink.Commit): a
// detached tunnel becomes the slot's when the slot has none. When the slot
// has one, up or starting, keeping both would have two devices of one key
// take the peer from each other (see the package documentation): l moves
// onto the slot's tunnel, before its first send, and its own stops. A move
// that cannot be made in time (ctx) leaves l on its own tunnel until it
// closes.
func (o *Outbound) commit(ctx context.Context, l *packetLink, r *slot.Res[*tunnel]) {
	if o.tunnels.adopt(r) || !r.Detached() {
		return
	}
	shared, err := o.tunnels.acquireShared(ctx)
	if err != nil {
		o.log.Debug(fmt.Sprintf("wireguard: the chosen candidate keeps its own tunnel: %v", err))
		return
	}
	u, err := listenEndpoint(shared.V)
	if err != nil {
		shared.Release()
		o.log.Debug(fmt.Sprintf("wireguard: the chosen candidate keeps its own tunnel: %v", err))
		return
	}
	l.move(u, shared.V, shared.Release)()
}

// CarriesUDP reports true: each datagram goes to its own peer inside the
// tunnel (outbound.Networks).
func (o *Outbound) CarriesUDP() bool { return true }

// Purge acts on health's finding the node dead (outbound.Purger): a tunnel
// whose peer answers no handshake is closed, its flows with it, and the
// next dial starts a new one; a tunnel whose peer still answers is kept
// (see the package documentation).
func (o *Outbound) Purge() { o.tunnels.purge() }

// ServerFamily is the address family of the endpoint the current tunnel
// sends to; ok is false while there is no tunnel. A stream's RemoteAddr
// names its destination inside the tunnel, not the endpoint.
func (o *Outbound) ServerFamily() (f netx.Family, ok bool) {
	ep, ok := o.tunnels.endpoint()
	if !ok {
		return netx.V4, false
	}
	return netx.FamilyOf(ep.Addr()), true
}

// SlotState reads the state of the slot that holds the tunnel (phase,
// generation, backoff, last error), for the API and metrics; ok is always
// true.
func (o *Outbound) SlotState() (st slot.State, ok bool) { return o.tunnels.slot.State(), true }

// Close stops the tunnel and ends every flow that rides it; later dials
// fail. It is idempotent.
func (o *Outbound) Close() error { return o.tunnels.Close() }
