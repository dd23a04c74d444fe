// Package http is the HTTP CONNECT proxy client: one CONNECT per stream,
// with optional Basic proxy authorization, over the outbound's transport.
// HTTP carries no datagrams.
package http

import (
	"context"
	"encoding/base64"
	"errors"
	"net"
	"strings"
	"sync"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/spec"
	"switchyard/transport"
)

// Outbound is an HTTP CONNECT outbound.
type Outbound struct {
	transport *transport.Dialer
	authLine  string // the Proxy-Authorization header line with its CRLF; "" without credentials
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Prober   = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
)

// New builds an HTTP outbound. It encodes the credentials once; it opens no
// socket.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	if deps.Dialer == nil {
		return nil, errors.New("http: no dialer")
	}
	t, err := transport.New(o, transport.Options{Dialer: deps.Dialer, Resolver: deps.Servers, Logger: deps.Logger, ConnectTimeout: deps.ConnectTimeout})
	if err != nil {
		return nil, err
	}
	out := &Outbound{transport: t}
	if strings.Contains(o.Username, ":") {
		return nil, errors.New("http: a Basic username cannot contain a colon")
	}
	if o.Username != "" || o.Password != "" {
		token := base64.StdEncoding.EncodeToString([]byte(o.Username + ":" + o.Password))
		out.authLine = "Proxy-Authorization: Basic " + token + "\r\n"
	}
	return out, nil
}

// ProbeTarget is the proxy server.
func (o *Outbound) ProbeTarget() netx.Addr { return o.transport.ProbeServer() }

// headBufSize bounds the proxy's response head: the client runtime buffer of
// an HTTP flow.
const headBufSize = 16 << 10

var headBufs = sync.Pool{New: func() any { b := make([]byte, headBufSize); return &b }}

// DialStream connects to the proxy, sends CONNECT for the flow's destination
// and reads the response head. A 2xx status hands over the connection (with
// any bytes that arrived behind the head); any other status fails the dial
// with the status line.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	req, err := appendConnect(nil, f.Dst, o.authLine)
	if err != nil {
		return nil, err
	}
	c, err := o.transport.Dial(ctx)
	if err != nil {
		return nil, err
	}
	var rest []byte
	netx.Mark(ctx, netx.PhaseHandshake)
	err = netx.Within(ctx, c, func() error {
		if _, err := c.Write(req); err != nil {
			return err
		}
		rest, err = readHead(c)
		return err
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	if len(rest) > 0 {
		return &prefixConn{Conn: c, rest: rest}, nil
	}
	return c, nil
}

// CarriesUDP reports false: an HTTP proxy carries streams only
// (outbound.Networks).
func (o *Outbound) CarriesUDP() bool { return false }

// DialPacket refuses: HTTP carries no datagrams.

func (o *Outbound) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	return nil, &outbound.NoUDPError{What: "http"}
}

// readHead reads the response head from c into a pooled buffer and returns a
// copy of the bytes read past it, if any.
func readHead(c net.Conn) ([]byte, error) {
	bp := headBufs.Get().(*[]byte)
	defer headBufs.Put(bp)
	buf := *bp
	var (
		have int
		p    headParser
	)
	for {
		if have == len(buf) {
			return nil, proxyconn.ErrUpstreamFrameTooLarge
		}
		n, rerr := c.Read(buf[have:])
		have += n
		end, err := p.parse(buf[:have])
		if err != nil {
			return nil, err
		}
		if end > 0 {
			if end == have {
				return nil, nil
			}
			return append([]byte(nil), buf[end:have]...), nil
		}
		if rerr != nil {
			return nil, closed(rerr)
		}
	}
}

// Close releases what the outbound holds between flows (a shared gRPC
// connection); the supervisor calls it once a retired version's last flow
// has ended.
func (o *Outbound) Close() error { return o.transport.Close() }
