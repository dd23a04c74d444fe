// Package transport opens the stream under a proxy client: it resolves the
// proxy server, connects under the socket policy, sets the proxy keepalive
// schedule, layers TLS when the outbound has a tls table (the Go stack, or a
// browser-shaped ClientHello with a fingerprint), and then the transport:
// plain TCP, WebSocket (with early data), HTTP upgrade, gRPC over HTTP/2, or
// XHTTP over HTTP/2 or HTTP/1.1.
package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"switchyard/internal/connpool"
	"switchyard/netx"
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

// ErrDatagrams refuses a UDP destination: a proxy's UDP rides inside its
// stream.
var ErrDatagrams = errors.New("a proxy transport carries no datagrams of its own")

// ErrClosed is the error of a dial on a closed Dialer, and of the streams
// of a shared connection the Dialer's close ended: netx.FaultRetired, no
// failure of the upstream.
var ErrClosed error = &netx.FaultError{Kind: netx.FaultRetired, Err: errors.New("transport: the dialer is closed")}

// DefaultUserAgent is sent by the HTTP-based transports (WebSocket, HTTP
// upgrade, gRPC) unless the ws headers name another: a desktop Chrome.
const DefaultUserAgent = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/144.0.0.0 Safari/537.36"

// Dialer dials one outbound's proxy server. It is safe for concurrent use.
type Dialer struct {
	server   netx.Addr
	strategy netx.Strategy
	resolver netx.Resolver
	dialer   *netx.Dialer
	tls      *tlsLayer // nil: no TLS layer
	log      *slog.Logger

	ws      *wsConfig      // type ws
	upgrade *upgradeConfig // type httpupgrade
	grpc    *grpcPool      // type grpc
	xhttp   *xhttpClient   // type xhttp
	// pool keeps bare server connections (connected, TLS completed) for
	// the next dials: plain TCP transports only, whose stream is the
	// connection itself (pool.go).
	pool *connpool.Pool
	// beneath makes a TLS stream a *TLSStream whose TCP conn a flow may
	// step down to (Options.Beneath).
	beneath bool
}

// Options is what a Dialer is built with: the transport's own narrow view of
// an outbound's dependencies.
type Options struct {
	Dialer   *netx.Dialer  // sockets under the socket policy; required
	Resolver netx.Resolver // resolves the proxy server; nil: the system's
	Logger   *slog.Logger  // nil: discarded
	// ConnectTimeout is the generation's connect timeout, which bounds a
	// pool's refresh dials (netx.EstablishTimeout); 0: the default.
	ConnectTimeout time.Duration
	// Beneath makes every TLS stream a *TLSStream, whose TCP conn a flow
	// may step down to (VLESS Vision). It needs a tls table and the plain
	// TCP transport.
	Beneath bool
}

// New builds the dialer of a proxy outbound. It fills in the transport's
// defaults, refuses an inconsistent transport, reads the CA bundle now (a bad
// one fails the build) and opens no socket.
func New(o spec.Outbound, opts Options) (*Dialer, error) {
	server, err := netx.ParseAddr(o.Server)
	if err != nil {
		return nil, err
	}
	strategy, err := netx.ParseStrategy(o.AddressFamily)
	if err != nil {
		return nil, err
	}
	if opts.Dialer == nil {
		return nil, errors.New("transport: no dialer")
	}
	d := &Dialer{server: server, strategy: strategy, resolver: opts.Resolver, dialer: opts.Dialer, log: opts.Logger}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.resolver == nil {
		d.resolver = netx.SystemResolver{}
	}
	t := o.Transport
	// The name the HTTP-based transports present when none is set.
	host := server.Host()
	if o.TLS != nil && o.TLS.ServerName != "" {
		host = o.TLS.ServerName
	}
	var alpn []string // the ALPN a transport needs, nil: the tls table's own
	switch t.Type {
	case "", "tcp":
	case "ws":
		if d.ws, err = newWSConfig(t, host); err != nil {
			return nil, err
		}
		alpn = []string{"http/1.1"}
	case "httpupgrade":
		if d.upgrade, err = newUpgradeConfig(t, host); err != nil {
			return nil, err
		}
		alpn = []string{"http/1.1"}
	case "grpc":
		cfg, err := newGRPCConfig(t, host, o.TLS != nil)
		if err != nil {
			return nil, err
		}
		d.grpc = newGRPCPool(d, cfg)
		alpn = []string{"h2"}
	case "xhttp":
		var tlsALPN []string
		reality := false
		if o.TLS != nil {
			tlsALPN, reality = o.TLS.ALPN, o.TLS.Reality != nil
		}
		cfg, err := newXHTTPConfig(t, host, o.TLS != nil, reality, tlsALPN)
		if err != nil {
			return nil, err
		}
		d.xhttp = newXHTTPClient(d, cfg, opts.ConnectTimeout)
		alpn = cfg.alpn()
		if cfg.h3 {
			std, err := tlsConfig(*o.TLS, server)
			if err != nil {
				return nil, err
			}
			d.xhttp.h3 = newH3Client(std, d.xhttp.keepAlive)
		}
		if dl := t.Download; dl != nil {
			// The download's own dialer: its server, TLS layer and
			// requests, under the same socket policy and resolver.
			sub := spec.Outbound{Server: dl.Server, AddressFamily: o.AddressFamily, TLS: dl.TLS, Transport: spec.Transport{
				Type: "xhttp", Mode: cfg.mode, Path: dl.Path, Host: dl.Host, Headers: dl.Headers,
				XPaddingMin: dl.XPaddingMin, XPaddingMax: dl.XPaddingMax, XMux: dl.XMux}}
			dd, err := New(sub, opts)
			if err != nil {
				return nil, fmt.Errorf("xhttp download: %w", err)
			}
			d.xhttp.down = dd.xhttp
		}
	default:
		return nil, fmt.Errorf("unknown transport type %q", t.Type)
	}
	if o.TLS != nil {
		if d.tls, err = newTLSLayer(*o.TLS, server, alpn); err != nil {
			return nil, err
		}
	}
	if opts.Beneath {
		if d.tls == nil || d.ws != nil || d.upgrade != nil || d.grpc != nil || d.xhttp != nil {
			return nil, errors.New("transport: stepping down to the TCP conn under TLS needs a tls table and the tcp transport")
		}
		d.beneath = true
		d.tls.fullRecords()
	}
	if d.ws == nil && d.upgrade == nil && d.grpc == nil && d.xhttp == nil {
		d.pool = newPool(d, opts.ConnectTimeout)
	}
	return d, nil
}

// Server is the proxy server's address.
func (d *Dialer) Server() netx.Addr { return d.server }

// ProbeServer is the address a raw TCP connect probe may reach: the
// server's, or none (the zero Addr) when the transport reaches it over UDP
// only (XHTTP over HTTP/3).
func (d *Dialer) ProbeServer() netx.Addr {
	if d.xhttp != nil && d.xhttp.h3 != nil {
		return netx.Addr{}
	}
	return d.server
}

// Dial opens a stream to the proxy server: resolve, connect, keepalive, TLS
// when configured, then the transport. A WebSocket with early data returns
// once TLS is up; its HTTP handshake rides with the first Write.
func (d *Dialer) Dial(ctx context.Context) (net.Conn, error) {
	if d.grpc != nil {
		c, err := d.grpc.dial(ctx)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
	if d.xhttp != nil {
		return d.xhttp.dial(ctx)
	}
	if d.pool != nil {
		return d.fromPool(ctx)
	}
	c, err := d.connect(ctx)
	if err != nil {
		return nil, err
	}
	switch {
	case d.ws != nil:
		return d.ws.open(ctx, c)
	case d.upgrade != nil:
		return d.upgrade.open(ctx, c)
	}
	return c, nil
}

// DialNetwork is Dial for a destination network: a UDP one is refused, since
// a proxy's datagrams ride inside its stream.
func (d *Dialer) DialNetwork(ctx context.Context, network netx.Network) (net.Conn, error) {
	if network == netx.UDP {
		return nil, ErrDatagrams
	}
	return d.Dial(ctx)
}

// Close releases what the dialer keeps between dials (the shared HTTP/2
// connection of gRPC, the pooled connections): streams still open end with
// the HTTP/2 connection; a stream taken from the pool is the flow's. A gRPC
// Dial fails after Close. It is idempotent.
func (d *Dialer) Close() error {
	if d.grpc != nil {
		d.grpc.close()
	}
	if d.xhttp != nil {
		d.xhttp.close()
	}
	if d.pool != nil {
		d.pool.Close()
	}
	return nil
}

// Purge lets go of what the dialer keeps between dials (the shared HTTP/2
// connection of gRPC, the pooled connections), so that the next Dial
// connects afresh. Streams open on it are not cut: the HTTP/2 connection
// closes once the last of them ends. Dial still works after Purge.
func (d *Dialer) Purge() {
	if d.grpc != nil {
		d.grpc.purge()
	}
	if d.xhttp != nil {
		d.xhttp.purge()
	}
	if d.pool != nil {
		d.pool.Purge()
	}
}

// connect resolves the server with the server resolver under the address
// family, connects to the first address that answers, sets the keepalive
// schedule and completes the TLS handshake when TLS is configured.
func (d *Dialer) connect(ctx context.Context) (net.Conn, error) {
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
	var under net.Conn = c
	var rc *recordConn
	switch {
	case d.beneath:
		rc = &recordConn{TCPConn: c}
		under = rc
	case d.pool != nil, d.ws != nil, d.upgrade != nil:
		// TLS under the tcp transport, a WebSocket or an HTTP upgrade: a
		// TLSStream that never steps down, whose reads take the records
		// already received (TLSStream.Read, ReadReceived).
		rc = &recordConn{TCPConn: c, open: true}
		under = rc
	}
	tc, err := d.tls.client(ctx, under)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("tls handshake with %s: %w", d.server, err)
	}
	if rc != nil {
		return &TLSStream{Conn: tc, raw: rc, version: tlsVersion(tc)}, nil
	}
	return tc, nil
}
