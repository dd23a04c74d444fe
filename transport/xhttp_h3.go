package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"switchyard/netx"
)

// xhCC is one multiplexed HTTP connection of an xhttp client: HTTP/2 (Go's
// *http.ClientConn) or HTTP/3 (xhH3).
type xhCC interface {
	RoundTrip(*http.Request) (*http.Response, error)
	// Err is not nil once the connection can carry no more requests.
	Err() error
	// Available is how many more requests it may start now.
	Available() int
	Close() error
}

// xhAddrs is what a flow shows of its connection: its two ends.
type xhAddrs interface {
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
}

// onBroken calls f (on a goroutine of the connection's) once cc can carry
// no more requests.
func onBroken(cc xhCC, f func()) {
	switch cc := cc.(type) {
	case *http.ClientConn:
		cc.SetStateHook(func(cc *http.ClientConn) {
			if cc.Err() != nil {
				f()
			}
		})
	case *xhH3:
		go func() {
			<-cc.conn.Context().Done()
			f()
		}()
	}
}

// XHTTP over HTTP/3 (the tls table's alpn ["h3"]): each connection is a
// QUIC connection of its own UDP socket, bound under the socket policy,
// with TLS 1.3 from the tls table (Go's handshake: a QUIC ClientHello has
// no browser shape). Flows share connections as over HTTP/2 (xmux); QUIC
// runs its own streams' flow control.
const (
	// xhH3KeepAlive is the QUIC keepalive of an HTTP/3 connection without
	// an xmux h_keep_alive_period: well inside the 30 s idle timeout.
	xhH3KeepAlive = 10 * time.Second
	xhH3Idle      = 30 * time.Second
	// h3NoError is HTTP/3's H3_NO_ERROR.
	h3NoError quic.ApplicationErrorCode = 0x100
)

// xhH3 is one HTTP/3 connection: its UDP socket, QUIC transport and
// connection, and the HTTP/3 client on it.
type xhH3 struct {
	pc   *net.UDPConn
	tr   *quic.Transport
	conn *quic.Conn
	cc   *http3.ClientConn
}

func (c *xhH3) RoundTrip(req *http.Request) (*http.Response, error) { return c.cc.RoundTrip(req) }

func (c *xhH3) Err() error {
	if err := c.conn.Context().Err(); err != nil {
		return context.Cause(c.conn.Context())
	}
	return nil
}

// Available: QUIC holds a request that exceeds the server's stream limit
// until a stream is free, so there is no count to run out of here.
func (c *xhH3) Available() int {
	if c.Err() != nil {
		return 0
	}
	return math.MaxInt32
}

func (c *xhH3) Close() error {
	c.conn.CloseWithError(h3NoError, "")
	c.tr.Close()
	return c.pc.Close()
}

func (c *xhH3) LocalAddr() net.Addr  { return c.conn.LocalAddr() }
func (c *xhH3) RemoteAddr() net.Addr { return c.conn.RemoteAddr() }

// h3Client is what an xhttp client needs to open HTTP/3 connections.
type h3Client struct {
	tls  *tls.Config
	quic *quic.Config
	h3   *http3.Transport // only for NewClientConn
}

func newH3Client(std *tls.Config, keepAlive time.Duration) *h3Client {
	cfg := std.Clone()
	cfg.NextProtos = []string{http3.NextProtoH3}
	cfg.MinVersion = tls.VersionTLS13
	switch {
	case keepAlive == 0 || keepAlive > xhH3Idle:
		keepAlive = xhH3KeepAlive
	case keepAlive < 0:
		keepAlive = 0
	}
	return &h3Client{tls: cfg, quic: &quic.Config{MaxIdleTimeout: xhH3Idle, KeepAlivePeriod: keepAlive}, h3: &http3.Transport{}}
}

// newH3Conn opens one HTTP/3 connection under ctx to the first of the
// server's addresses whose QUIC handshake completes.
func (x *xhttpClient) newH3Conn(ctx context.Context) (*xhH3, error) {
	d := x.d
	addrs, err := netx.Resolve(ctx, d.server, d.strategy, d.resolver)
	if err != nil {
		return nil, err
	}
	if err := netx.Admit(ctx); err != nil {
		return nil, err
	}
	var errs []error
	for _, a := range addrs {
		c, err := x.dialH3(ctx, a)
		if err == nil {
			return c, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("xhttp: HTTP/3 to %s: %w", d.server, errors.Join(errs...))
}

func (x *xhttpClient) dialH3(ctx context.Context, a netip.AddrPort) (*xhH3, error) {
	pc, err := x.d.dialer.ListenUDP(ctx, netx.FamilyOf(a.Addr()))
	if err != nil {
		return nil, err
	}
	tr := &quic.Transport{Conn: pc}
	netx.Mark(ctx, netx.PhaseTLS)
	conn, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(a), x.h3.tls, x.h3.quic)
	if err != nil {
		tr.Close()
		pc.Close()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", context.Cause(ctx), err)
		}
		return nil, fmt.Errorf("QUIC handshake: %w", err)
	}
	return &xhH3{pc: pc, tr: tr, conn: conn, cc: x.h3.h3.NewClientConn(conn)}, nil
}
