// Package trojan is the Trojan proxy client over TLS: CONNECT for streams,
// UDP ASSOCIATE for datagram links whose packets each name their own peer.
package trojan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	codec "switchyard/protocol/trojan"
	"switchyard/spec"
	"switchyard/transport"
)

// Outbound is a Trojan outbound.
type Outbound struct {
	transport *transport.Dialer
	key       codec.Key // the password's key, derived once
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Prober   = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds a Trojan outbound: it hashes the password once and prepares
// the TLS transport; it opens no socket. Trojan runs only over TLS, so an
// outbound without a tls table is refused.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	if deps.Dialer == nil {
		return nil, errors.New("trojan: no dialer")
	}
	if o.TLS == nil {
		return nil, errors.New("trojan: a tls table is required (trojan runs over TLS)")
	}
	if o.Password == "" {
		return nil, errors.New("trojan: password must not be empty")
	}
	t, err := transport.New(o, transport.Options{Dialer: deps.Dialer, Resolver: deps.Servers, Logger: deps.Logger, ConnectTimeout: deps.ConnectTimeout})
	if err != nil {
		return nil, err
	}
	return &Outbound{transport: t, key: codec.NewKey(o.Password)}, nil
}

// CarriesUDP reports true: UDP rides the Trojan stream, over any transport,
// each packet naming its peer (outbound.Networks).
func (o *Outbound) CarriesUDP() bool { return true }

// ProbeTarget is the Trojan server.
func (o *Outbound) ProbeTarget() netx.Addr { return o.transport.ProbeServer() }

// DialStream connects to the server and sends the CONNECT request on its
// own. The server connection itself is the flow's stream from there on: the
// flow's bytes travel unchanged, and it keeps the transport's half-close.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	return o.open(ctx, codec.CmdConnect, f.Dst)
}

// DialPacket connects to the server and sends the UDP ASSOCIATE request on
// its own. The request names f.Dst, the destination of the packet that opens
// the link, as Xray's and sing-box's clients name it: a server that routes
// the association by the request's address (sing-box's route rules by
// destination IP) then sees a real peer, where a 0.0.0.0:0 placeholder
// matches no rule but a catch-all. Every packet on the link still names its
// own peer, so one link serves all the peers of an association. A link
// opened toward no peer names the placeholder.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	to := f.Dst
	if !to.IsValid() {
		to = udpPlaceholder
	}
	c, err := o.open(ctx, codec.CmdUDPAssociate, to)
	if err != nil {
		return nil, err
	}
	return newPacketLink(c), nil
}

// udpPlaceholder is what a UDP ASSOCIATE names when it opens toward no peer.
var udpPlaceholder = netx.Addr{IP: netip.IPv4Unspecified()}

// open dials the server and writes the request header, bounded by ctx.
func (o *Outbound) open(ctx context.Context, cmd byte, to netx.Addr) (net.Conn, error) {
	req, err := codec.AppendRequest(make([]byte, 0, codec.RequestHeaderMax), &o.key, cmd, to)
	if err != nil {
		return nil, err
	}
	c, err := proxyconn.Open(ctx, o.transport, req)
	if err != nil {
		return nil, fmt.Errorf("trojan: %w", err)
	}
	return c, nil
}

// Close releases what the outbound holds between flows (a shared gRPC
// connection); the supervisor calls it once a retired version's last flow
// has ended.
func (o *Outbound) Close() error { return o.transport.Close() }
