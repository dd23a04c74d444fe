// Package dnsout is the dns outbound: flows routed to it are answered by
// the in-process DNS service (package dns/serve) instead of leaving the
// process. With spec.DNS.Serve the plane routes every flow to port 53
// here; a rule may send others.
//
// A stream is the service's DNS-over-TCP connection and a datagram link
// its packet link, whatever the flow's destination and port: a rule sent
// the flow here, and the destination only names whom the client thinks it
// asks (answers on a link are attributed to it). Construction opens
// nothing; every dial costs a net.Pipe and a goroutine (stream) or a
// channel (link), no socket.
package dnsout

import (
	"context"
	"net"

	"switchyard/dns/serve"
	"switchyard/netx"
	"switchyard/outbound"
)

// Outbound hands flows to a DNS service.
type Outbound struct {
	svc *serve.Service
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New returns the outbound of svc.
func New(svc *serve.Service) *Outbound { return &Outbound{svc: svc} }

// DialStream returns the service's DNS-over-TCP connection (serve.Service.Stream).
// It fails only when ctx is already done.
func (o *Outbound) DialStream(ctx context.Context, _ netx.Flow) (net.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return o.svc.Stream(), nil
}

// DialPacket returns a packet link of the service (serve.Service.PacketLink),
// which lives until its Close, not ctx's end. It fails only when ctx is
// already done.
func (o *Outbound) DialPacket(ctx context.Context, _ netx.Flow) (netx.PacketLink, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return o.svc.PacketLink(), nil
}

// CarriesUDP reports true (outbound.Networks).
func (*Outbound) CarriesUDP() bool { return true }
