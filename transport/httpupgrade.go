package transport

import (
	"bufio"
	"context"
	"fmt"
	"net"

	"switchyard/netx"

	"switchyard/spec"
)

// upgradeConfig is the HTTP upgrade transport: one HTTP/1.1 Upgrade
// exchange, then the raw bytes of the flow both ways.
type upgradeConfig struct{ head httpHead }

func newUpgradeConfig(t spec.Transport, host string) (*upgradeConfig, error) {
	h, err := newHTTPHead("httpupgrade", t, t.Path, host)
	if err != nil {
		return nil, err
	}
	return &upgradeConfig{head: h}, nil
}

// open sends the upgrade request over c and waits for the 101.
func (u *upgradeConfig) open(ctx context.Context, c net.Conn) (net.Conn, error) {
	var out net.Conn
	netx.Mark(ctx, netx.PhaseTransport)
	err := netx.Within(ctx, c, func() error {
		req := append(u.head.appendRequest(make([]byte, 0, 512)), "\r\n"...)
		if _, err := c.Write(req); err != nil {
			return fmt.Errorf("httpupgrade handshake: %w", err)
		}
		br := bufio.NewReaderSize(c, responseBuf)
		if _, err := readUpgrade(br, "httpupgrade"); err != nil {
			return err
		}
		out = withBuffered(c, br)
		return nil
	})
	if err != nil {
		c.Close()
		return nil, err
	}
	return out, nil
}
