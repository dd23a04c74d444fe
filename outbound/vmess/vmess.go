// Package vmess is the VMess outbound (AEAD header): TCP flows as chunked
// streams, and UDP either with one target per link or, with packet_encoding
// "xudp", as XUDP over a Mux.Cool stream, whose packets each name their own
// peer; all over the proxy transport.
package vmess

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/xudp"
	protocol "switchyard/protocol/vmess"
	"switchyard/spec"
	"switchyard/transport"
)

// bufSize is VMESS_BUF: each flow's staging buffer toward the server and its
// read buffer from it.
const bufSize = 32 * 1024

// stagingReserve is what an XUDP datagram's frame may add to its payload in
// the XUDP link's staging buffer: the codec's HEADER_MAX rounded up to 64
// bytes. An XUDP datagram longer than bufSize - stagingReserve is refused;
// the Mux stream under it is cut in chunks as any stream is.
const stagingReserve = 384

// Outbound dials VMess flows through one proxy server.
type Outbound struct {
	dialer   *transport.Dialer
	id       *protocol.ID
	security protocol.Security
	padding  bool
	rand     io.Reader
	now      func() time.Time
	// xudp derives the XUDP global ID of each association from its source;
	// nil without XUDP.
	xudp *xudp.IDs
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Prober   = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds the outbound: it derives the user's keys and the transport
// dialer, and opens no socket.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	var ids *xudp.IDs
	switch o.PacketEncoding {
	case "":
	case "xudp":
		ids = xudp.NewIDs()
	default:
		return nil, fmt.Errorf("vmess: unknown packet_encoding %q (expected \"\" or \"xudp\")", o.PacketEncoding)
	}
	uuid, err := protocol.ParseUUID(o.UUID)
	if err != nil {
		return nil, err
	}
	sec, err := protocol.ParseSecurity(o.Security)
	if err != nil {
		return nil, err
	}
	d, err := transport.New(o, transport.Options{Dialer: deps.Dialer, Resolver: deps.Servers, Logger: deps.Logger, ConnectTimeout: deps.ConnectTimeout})
	if err != nil {
		return nil, err
	}
	return &Outbound{
		dialer:   d,
		id:       protocol.NewID(uuid),
		security: sec,
		padding:  o.GlobalPadding,
		rand:     rand.Reader,
		now:      time.Now,
		xudp:     ids,
	}, nil
}

// CarriesUDP reports true: UDP rides the VMess stream, over any transport
// (outbound.Networks): one target per link, or, with packet_encoding
// "xudp", every packet to its own peer.
func (o *Outbound) CarriesUDP() bool { return true }

// ProbeTarget is the proxy server, which a balancer's probe connects to.
func (o *Outbound) ProbeTarget() netx.Addr { return o.dialer.ProbeServer() }

// DialStream opens a TCP flow to f.Dst: it returns once the request header
// has been written to the server.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	c, s, err := o.open(ctx, protocol.CommandTCP, f.Dst)
	if err != nil {
		return nil, err
	}
	return newStreamConn(c, s), nil
}

// DialPacket opens a UDP link. Without XUDP every datagram goes to f.Dst,
// the destination of the packet that opened the link, and every reply is
// attributed to f.Dst. With XUDP the request opens Mux.Cool, as Xray's
// client does for the destination v1.mux.cool, and every packet names its
// own peer.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	if o.xudp == nil {
		c, s, err := o.open(ctx, protocol.CommandUDP, f.Dst)
		if err != nil {
			return nil, err
		}
		return newPacketLink(c, s, f.Dst), nil
	}
	c, s, err := o.open(ctx, protocol.CommandMux, netx.Addr{})
	if err != nil {
		return nil, err
	}
	return xudp.NewLink(newMuxConn(c, s), f.Dst, o.xudp.For(f.Src), bufSize, stagingReserve), nil
}

// open dials the server and writes the request header on its own, within
// ctx.
func (o *Outbound) open(ctx context.Context, cmd protocol.Command, dst netx.Addr) (net.Conn, *protocol.Session, error) {
	s, err := protocol.NewSession(protocol.Request{Command: cmd, Security: o.security, GlobalPadding: o.padding, Dst: dst}, o.rand)
	if err != nil {
		return nil, nil, err
	}
	hdr, err := s.AppendRequest(make([]byte, 0, protocol.MaxHeaderLen), o.id, o.now())
	if err != nil {
		return nil, nil, err
	}
	c, err := proxyconn.Open(ctx, o.dialer, hdr)
	if err != nil {
		return nil, nil, fmt.Errorf("vmess: %w", err)
	}
	return c, s, nil
}

// Close releases what the outbound holds between flows (a shared gRPC
// connection); the supervisor calls it once a retired version's last flow
// has ended.
func (o *Outbound) Close() error { return o.dialer.Close() }
