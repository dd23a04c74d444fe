package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"switchyard/netx"
)

// Dialer opens the sockets of DNS queries: network is "udp" or "tcp" and
// address an "ip:port" (an IPv6 address in brackets). A "udp" connection
// carries one datagram per Write and returns one per Read; a "tcp" one is
// a byte stream. Every socket a server client opens is made through it, so
// the caller decides where queries go: straight out under the socket
// policy (PolicyDialer) or as flows through the route table.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// PolicyDialer opens the sockets of queries with d: TCP with d.Connect,
// UDP as a connected socket under d's policy (its mark, interface, bind
// address of the family, and hook).
func PolicyDialer(d *netx.Dialer) Dialer { return policyDialer{d} }

type policyDialer struct{ d *netx.Dialer }

func (p policyDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return nil, fmt.Errorf("dns: dial %s %q: not an ip:port", network, address)
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	switch network {
	case "tcp", "tcp4", "tcp6":
		c, err := p.d.Connect(ctx, ap)
		if err != nil {
			return nil, err
		}
		return c, nil
	case "udp", "udp4", "udp6":
		v4 := ap.Addr().Is4()
		nd := net.Dialer{Control: p.d.Policy.Control}
		bind, nw := p.d.Policy.BindV6, "udp6"
		if v4 {
			bind, nw = p.d.Policy.BindV4, "udp4"
		}
		if bind.IsValid() {
			nd.LocalAddr = &net.UDPAddr{IP: bind.AsSlice()}
		}
		return nd.DialContext(ctx, nw, ap.String())
	}
	return nil, fmt.Errorf("dns: dial: unknown network %q", network)
}
