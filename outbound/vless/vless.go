// Package vless is the VLESS proxy client: TCP streams, and UDP either as
// one target per datagram link or, with packet_encoding "xudp", as XUDP over
// Mux.Cool, whose packets each name their own peer.
package vless

import (
	"context"
	"errors"
	"fmt"
	"net"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/xudp"
	codec "switchyard/protocol/vless"
	"switchyard/spec"
	"switchyard/transport"
)

// BufSize (VLESS_BUF) bounds one frame of a datagram link each way: the
// pooled buffers a packet is sealed in and a large frame from the server is
// read into, both held only while a packet is in flight (see
// proxyconn.Link).
const BufSize = 16 * 1024

// Outbound is a VLESS outbound.
type Outbound struct {
	transport *transport.Dialer
	id        codec.UUID
	// xudp derives the XUDP global ID of each association from its source;
	// nil without XUDP.
	xudp *xudp.IDs
	// vision: the Vision flow, over a TLS stream whose TCP conn the flow
	// steps down to; its UDP is always XUDP, as Xray's client sends it.
	vision bool
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Prober   = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds a VLESS outbound: it parses the UUID once and prepares the
// transport; it opens no socket. The flow is the plain one ("") or Vision,
// which needs TLS (or REALITY) over the tcp transport.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	if deps.Dialer == nil {
		return nil, errors.New("vless: no dialer")
	}
	out := &Outbound{}
	switch o.Flow {
	case "":
	case codec.FlowVision:
		if o.TLS == nil || (o.Transport.Type != "" && o.Transport.Type != "tcp") {
			return nil, fmt.Errorf("vless: flow %q runs over TLS or REALITY on the tcp transport", o.Flow)
		}
		out.vision = true
	default:
		return nil, fmt.Errorf("vless: unknown flow %q (expected \"\" or %q)", o.Flow, codec.FlowVision)
	}
	switch o.PacketEncoding {
	case "":
	case "xudp":
		out.xudp = xudp.NewIDs()
	default:
		return nil, fmt.Errorf("vless: unknown packet_encoding %q (expected \"\" or \"xudp\")", o.PacketEncoding)
	}
	if out.vision && out.xudp == nil {
		out.xudp = xudp.NewIDs()
	}
	var err error
	if out.id, err = codec.ParseUUID(o.UUID); err != nil {
		return nil, err
	}
	if out.transport, err = transport.New(o, transport.Options{Dialer: deps.Dialer, Resolver: deps.Servers, Logger: deps.Logger, ConnectTimeout: deps.ConnectTimeout, Beneath: out.vision}); err != nil {
		return nil, err
	}
	return out, nil
}

// CarriesUDP reports true: UDP rides the VLESS stream, over any transport
// (outbound.Networks). What a server refuses for a given target (VLESS
// servers commonly reject UDP to port 443) is refused when that flow is
// admitted, not here.
func (o *Outbound) CarriesUDP() bool { return true }

// ProbeTarget is the VLESS server.
func (o *Outbound) ProbeTarget() netx.Addr { return o.transport.ProbeServer() }

// DialStream connects to the server and sends the TCP request on its own.
// The server's response header is read with the first Read.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	if o.vision {
		return o.openVision(ctx, codec.CmdTCP, f.Dst)
	}
	c, err := o.open(ctx, codec.CmdTCP, f.Dst)
	if err != nil {
		return nil, err
	}
	return &streamConn{Conn: c}, nil
}

// DialPacket connects to the server and sends the UDP request on its own.
// Without XUDP the request names f.Dst, the destination of the packet that
// opens the link, and the link carries that one target: every packet goes
// there whatever it names, and every reply comes from it. With XUDP the
// request opens Mux.Cool and every packet names its own peer.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	if o.vision {
		// Vision's UDP is XUDP over Mux.Cool. UDP to port 443 is QUIC,
		// which Vision does not carry: Xray's client refuses it alike.
		if f.Dst.Port == 443 {
			return nil, ErrVisionUDP443
		}
		v, err := o.openVision(ctx, codec.CmdMux, netx.Addr{})
		if err != nil {
			return nil, err
		}
		return xudp.NewLink(v, f.Dst, o.xudp.For(f.Src), BufSize, codec.RequestHeaderMax), nil
	}
	if o.xudp == nil {
		c, err := o.open(ctx, codec.CmdUDP, f.Dst)
		if err != nil {
			return nil, err
		}
		return newPacketLink(c, f.Dst), nil
	}
	c, err := o.open(ctx, codec.CmdMux, netx.Addr{})
	if err != nil {
		return nil, err
	}
	return xudp.NewLink(&streamConn{Conn: c}, f.Dst, o.xudp.For(f.Src), BufSize, codec.RequestHeaderMax), nil
}

// newPacketLink is the single-target link over c, a UDP stream toward
// target. A packet whose payload and the request header's reserve exceed
// the buffer is refused.
func newPacketLink(c net.Conn, target netx.Addr) *proxyconn.Link {
	return proxyconn.NewLink(&streamConn{Conn: c}, packetFraming{target}, BufSize, codec.RequestHeaderMax)
}

// open dials the server and writes the request header, bounded by ctx.
func (o *Outbound) open(ctx context.Context, cmd byte, to netx.Addr) (net.Conn, error) {
	req, err := codec.AppendRequest(make([]byte, 0, codec.RequestHeaderMax), &o.id, cmd, to)
	if err != nil {
		return nil, err
	}
	c, err := proxyconn.Open(ctx, o.transport, req)
	if err != nil {
		return nil, fmt.Errorf("vless: %w", err)
	}
	return c, nil
}

// ErrVisionUDP443 refuses UDP to port 443 over the Vision flow; its fault is
// netx.FaultLocalRefusal.
var ErrVisionUDP443 error = &netx.FaultError{Kind: netx.FaultLocalRefusal, Err: errors.New("vless: the vision flow does not carry UDP to port 443 (QUIC)")}

// Close releases what the outbound holds between flows (a shared gRPC
// connection); the supervisor calls it once a retired version's last flow
// has ended.
func (o *Outbound) Close() error { return o.transport.Close() }
