// Package vmess is the VMess outbound (AEAD header): TCP flows as chunked
// streams, and UDP with one target per link, over the proxy transport.
package vmess

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	protocol "switchyard/protocol/vmess"
	"switchyard/spec"
	"switchyard/transport"
)

// bufSize is VMESS_BUF: each flow's staging buffer toward the server and its
// read buffer from it.
const bufSize = 32 * 1024

// stagingReserve is what a datagram's chunk may add to its payload in the
// staging buffer: the codec's HEADER_MAX rounded up to 64 bytes. A datagram
// longer than bufSize - stagingReserve is refused.
const stagingReserve = 384

var (
	errUpstreamFrame = errors.New("upstream frame larger than the client runtime's buffer")
	errFrameTooLarge = errors.New("frame larger than the client runtime's buffer")
	// errXUDP is the refusal of the packet encoding this outbound lacks.
	errXUDP = errors.New(`vmess: packet_encoding "xudp" is not available`)
)

// Outbound dials VMess flows through one proxy server.
type Outbound struct {
	dialer   *transport.Dialer
	id       *protocol.ID
	security protocol.Security
	padding  bool
	rand     io.Reader
	now      func() time.Time
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Prober   = (*Outbound)(nil)
)

// New builds the outbound: it derives the user's keys and the transport
// dialer, and opens no socket.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	switch o.PacketEncoding {
	case "":
	case "xudp":
		return nil, errXUDP
	default:
		return nil, fmt.Errorf("vmess: unknown packet_encoding %q", o.PacketEncoding)
	}
	uuid, err := protocol.ParseUUID(o.UUID)
	if err != nil {
		return nil, err
	}
	sec, err := protocol.ParseSecurity(o.Security)
	if err != nil {
		return nil, err
	}
	d, err := transport.New(o, deps)
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
	}, nil
}

// ProbeTarget is the proxy server, which a balancer's probe connects to.
func (o *Outbound) ProbeTarget() netx.Addr { return o.dialer.Server() }

// DialStream opens a TCP flow to f.Dst: it returns once the request header
// has been written to the server.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	c, s, err := o.open(ctx, protocol.CommandTCP, f.Dst)
	if err != nil {
		return nil, err
	}
	return newStreamConn(c, s), nil
}

// DialPacket opens a UDP link whose every datagram goes to f.Dst, the
// destination of the packet that opened it, and whose every reply is
// attributed to f.Dst.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	c, s, err := o.open(ctx, protocol.CommandUDP, f.Dst)
	if err != nil {
		return nil, err
	}
	return newPacketLink(c, s, f.Dst), nil
}

// open dials the server and writes the request header on its own, within
// ctx.
func (o *Outbound) open(ctx context.Context, cmd protocol.Command, dst netx.Addr) (net.Conn, *protocol.Session, error) {
	s, err := protocol.NewSession(protocol.Request{Command: cmd, Security: o.security, GlobalPadding: o.padding, Dst: dst}, o.rand)
	if err != nil {
		return nil, nil, err
	}
	c, err := o.dialer.Dial(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("vmess: %w", err)
	}
	hdr, err := s.AppendRequest(make([]byte, 0, protocol.MaxHeaderLen), o.id, o.now())
	if err == nil {
		err = writeWithin(ctx, c, hdr)
	}
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("vmess: sending the request to %s: %w", o.dialer.Server(), err)
	}
	return c, s, nil
}

// writeWithin writes b to c, giving up when ctx ends, and leaves c with no
// write deadline.
func writeWithin(ctx context.Context, c net.Conn, b []byte) error {
	if dl, ok := ctx.Deadline(); ok {
		c.SetWriteDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.SetWriteDeadline(time.Unix(1, 0)) })
	_, err := c.Write(b)
	if !stop() {
		// ctx ended: the write may have been cut short, and the deadline
		// set by the callback may land after any reset done here.
		return ctx.Err()
	}
	c.SetWriteDeadline(time.Time{})
	return err
}
