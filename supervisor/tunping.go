package supervisor

import (
	"context"
	"net/netip"

	"switchyard/inbound/tun"
	"switchyard/internal/ping"
	"switchyard/netx"
	"switchyard/outbound/direct"
	"switchyard/plane"
)

// tunPinger relays the ICMP echo of a tun inbound: a destination the
// plane in force routes to a direct outbound is pinged with an
// unprivileged ping socket under the socket policy; any other route (a
// proxy, block) is refused.
type tunPinger struct {
	sv  *Supervisor
	tag string
}

func (sv *Supervisor) pinger(tag string) tun.Pinger { return tunPinger{sv: sv, tag: tag} }

func (p tunPinger) Echo(ctx context.Context, src, dst netip.Addr, payload []byte) ([]byte, bool, error) {
	pl := p.sv.cell.Load()
	if pl == nil {
		return nil, false, nil
	}
	f := netx.Flow{Network: netx.UDP, Dst: netx.Addr{IP: dst}, Src: netip.AddrPortFrom(src, 0), Inbound: p.tag}
	target, _ := pl.Route(&f)
	var q plane.Query
	q.Network, q.Dst, q.Peek = netx.UDP, f.Dst, true
	leaf := target.Resolve(&q)
	if leaf == nil {
		return nil, false, nil
	}
	if _, ok := leaf.Outbound().(*direct.Outbound); !ok {
		return nil, false, nil
	}
	reply, err := ping.Echo(ctx, ping.Options{Mark: p.sv.socket.Mark, Interface: p.sv.socket.Interface}, dst, payload)
	if err != nil {
		p.sv.log.Debug("tun echo relay failed", "inbound", p.tag, "destination", dst, "error", err)
	}
	return reply, true, err
}
