package proxyconn

import (
	"context"
	"fmt"
	"net"

	"switchyard/netx"
)

// Dialer opens the stream to a proxy server (a transport.Dialer).
type Dialer interface {
	Dial(ctx context.Context) (net.Conn, error)
	Server() netx.Addr
}

// Open dials the server and writes req, a request header, on its own,
// bounded by ctx: a proxy dial returns only after the upstream dial and the
// request's flush. A stream whose write failed is closed.
func Open(ctx context.Context, d Dialer, req []byte) (net.Conn, error) {
	c, err := d.Dial(ctx)
	if err != nil {
		return nil, err
	}
	netx.Mark(ctx, netx.PhaseHandshake)
	err = netx.Within(ctx, c, func() error {
		_, err := c.Write(req)
		return err
	})
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("sending the request to %s: %w", d.Server(), err)
	}
	return c, nil
}
