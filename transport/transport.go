// Package transport opens the stream under a proxy client: it resolves the
// proxy server, connects under the socket policy, sets the proxy keepalive
// schedule and layers TLS when the outbound has a tls table.
package transport

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// The keepalive schedule of every proxy upstream: the first probe after two
// minutes of silence, then every 30 s, given up after 3 unanswered probes.
// Linux would wait two hours; a proxy's peers routinely vanish without a FIN.
const (
	KeepAliveIdle     = 120 * time.Second
	KeepAliveInterval = 30 * time.Second
	KeepAliveRetries  = 3
)

// Dialer dials one outbound's proxy server.
type Dialer struct {
	server   netx.Addr
	strategy netx.Strategy
	resolver netx.Resolver
	dialer   *netx.Dialer
	tls      *tls.Config // nil: plain TCP
	log      *slog.Logger
}

// New builds the dialer of a proxy outbound. It reads the CA bundle now, so
// a bad one fails the build; it opens no socket.
func New(o spec.Outbound, deps outbound.Deps) (*Dialer, error) {
	server, err := netx.ParseAddr(o.Server)
	if err != nil {
		return nil, err
	}
	strategy, err := netx.ParseStrategy(o.AddressFamily)
	if err != nil {
		return nil, err
	}
	switch o.Transport.Type {
	case "", "tcp":
	default:
		return nil, fmt.Errorf("unknown transport type %q", o.Transport.Type)
	}
	d := &Dialer{server: server, strategy: strategy, resolver: deps.Servers, dialer: deps.Dialer, log: deps.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.resolver == nil {
		d.resolver = netx.SystemResolver{}
	}
	if o.TLS != nil {
		if d.tls, err = tlsConfig(*o.TLS, server); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Server is the proxy server's address, which a health probe connects to.
func (d *Dialer) Server() netx.Addr { return d.server }

// Dial resolves the server with the server resolver under the address
// family, connects to the first address that answers, sets the keepalive
// schedule, and completes the TLS handshake when TLS is configured.
func (d *Dialer) Dial(ctx context.Context) (net.Conn, error) {
	addrs, err := netx.Resolve(ctx, d.server, d.strategy, d.resolver)
	if err != nil {
		return nil, err
	}
	c, err := d.dialer.ConnectAny(ctx, addrs)
	if err != nil {
		return nil, err
	}
	if err := c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: KeepAliveIdle, Interval: KeepAliveInterval, Count: KeepAliveRetries}); err != nil {
		d.log.Debug(fmt.Sprintf("could not enable TCP keepalive: %v", err))
	}
	if d.tls == nil {
		return c, nil
	}
	tc := tls.Client(c, d.tls)
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", d.server, err)
	}
	return tc, nil
}
