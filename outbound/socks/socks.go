// Package socks is the SOCKS5 proxy client: CONNECT for streams and one UDP
// ASSOCIATE per datagram link, with optional username and password
// authentication, over the outbound's transport.
package socks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/protocol/socks5"
	"switchyard/spec"
	"switchyard/transport"
)

// Outbound is a SOCKS5 outbound.
type Outbound struct {
	transport *transport.Dialer
	dialer    *netx.Dialer // binds the relay sockets of associations
	auth      auth
	log       *slog.Logger
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Prober   = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds a SOCKS5 outbound. It encodes the greeting and the credentials
// once; it opens no socket.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	if deps.Dialer == nil {
		return nil, errors.New("socks: no dialer")
	}
	t, err := transport.New(o, transport.Options{Dialer: deps.Dialer, Resolver: deps.Servers, Logger: deps.Logger, ConnectTimeout: deps.ConnectTimeout})
	if err != nil {
		return nil, err
	}
	a, err := newAuth(o.Username, o.Password)
	if err != nil {
		return nil, err
	}
	log := deps.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Outbound{transport: t, dialer: deps.Dialer, auth: a, log: log}, nil
}

// CarriesUDP reports true: every datagram link is a UDP ASSOCIATE
// (outbound.Networks). A server that refuses the ASSOCIATE refuses it at
// admission; udp = false is the outbound's wrapper's refusal.
func (o *Outbound) CarriesUDP() bool { return true }

// ProbeTarget is the SOCKS server.
func (o *Outbound) ProbeTarget() netx.Addr { return o.transport.ProbeServer() }

// DialStream connects to the server, negotiates the method, authenticates
// when credentials are set and asks the server to CONNECT to the flow's
// destination. It returns the server connection itself once the server has
// answered success: from there on it carries the flow's bytes unchanged, and
// a plain TCP one keeps its half-close and splice.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	if err := socks5.CheckAddr(f.Dst); err != nil {
		return nil, fmt.Errorf("socks: %w", err)
	}
	c, err := o.transport.Dial(ctx)
	if err != nil {
		return nil, err
	}
	netx.Mark(ctx, netx.PhaseHandshake)
	err = netx.Within(ctx, c, func() error {
		if err := o.auth.negotiate(c); err != nil {
			return err
		}
		_, err := request(c, socks5.CmdConnect, f.Dst)
		return err
	})
	if err != nil {
		c.Close()
		if errors.Is(err, ErrHandshakeClosed) {
			// CONNECT runs as every proxy client's handshake does, and
			// says so in the same words; the association keeps its own.
			return nil, proxyconn.ErrHandshakeClosed
		}
		return nil, err
	}
	return c, nil
}

// Close releases what the outbound holds between flows (a shared gRPC
// connection); the supervisor calls it once a retired version's last flow
// has ended.
func (o *Outbound) Close() error { return o.transport.Close() }
