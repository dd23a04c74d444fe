package socks

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// DialPacket opens one UDP ASSOCIATE: a control connection of its own over
// the outbound's transport, the method round, a request naming 0.0.0.0:0,
// and, only once the reply names the relay, a UDP socket in the relay's
// family under the socket policy. The flow is not used: every packet names
// its own peer.
func (o *Outbound) DialPacket(ctx context.Context, _ netx.Flow) (netx.PacketLink, error) {
	control, err := o.transport.Dial(ctx)
	if err != nil {
		return nil, err
	}
	var relay netip.AddrPort
	netx.Mark(ctx, netx.PhaseHandshake)
	err = netx.Within(ctx, control, func() error {
		if err := o.auth.negotiate(control); err != nil {
			return err
		}
		bound, err := request(control, socks5.CmdUDPAssociate, netx.Addr{})
		if err != nil {
			return err
		}
		relay, err = relayAddr(bound, control.RemoteAddr())
		return err
	})
	if err != nil {
		control.Close()
		return nil, err
	}
	udp, err := o.dialer.ListenUDP(ctx, netx.FamilyOf(relay.Addr()))
	if err != nil {
		control.Close()
		return nil, fmt.Errorf("socks: binding the relay socket: %w", err)
	}
	l, err := newLink(control, udp, relay, o.log)
	if err != nil {
		control.Close()
		udp.Close()
		return nil, fmt.Errorf("socks: the relay socket: %w", err)
	}
	return l, nil
}

// relayAddr is where the association's datagrams go: the address the reply
// names, or, when it names the unspecified address (as servers commonly
// do), the IP of the server at the far end of the control connection.
func relayAddr(bound netx.Addr, server net.Addr) (netip.AddrPort, error) {
	if bound.IsName() {
		return netip.AddrPort{}, ErrRelayDomain
	}
	if bound.Port == 0 {
		return netip.AddrPort{}, fmt.Errorf("socks: the server names relay %s, with port 0", bound)
	}
	ip := bound.IP.Unmap()
	if !ip.IsValid() || ip.IsUnspecified() {
		ap, err := netip.ParseAddrPort(server.String())
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("socks: the relay is the unspecified address and the server's address %q is not an IP: %w", server, err)
		}
		ip = ap.Addr().Unmap()
	}
	return netip.AddrPortFrom(ip, bound.Port), nil
}
