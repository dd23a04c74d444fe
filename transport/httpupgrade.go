package transport

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"time"

	"switchyard/netx"

	"switchyard/spec"
)

// upgradeConfig is the HTTP upgrade transport: one HTTP/1.1 Upgrade
// exchange, then the raw bytes of the flow both ways.
type upgradeConfig struct {
	head  httpHead
	grace time.Duration // hijackGrace; shorter in tests
}

// hijackGrace is how long the stream stays quiet after the 101 is read.
// Nothing past the request goes out before the 101 is in, as Xray's client
// does; and a server built on Go's net/http that hijacks the connection
// after flushing its 101 and drops the buffered reader Hijack hands back
// (sing-box's) loses the first byte that reaches it between the flush and
// the hijack: its HTTP server keeps a one-byte background read pending while
// the handler runs. The window is a few microseconds of the server's own
// time, which a network round trip covers; on loopback or a LAN a client
// that writes at once lands in it about one flow in six. The grace keeps
// the first byte out of it; it is spent once per connection, inside the
// dial's deadline.
const hijackGrace = 2 * time.Millisecond

func newUpgradeConfig(t spec.Transport, host string) (*upgradeConfig, error) {
	h, err := newHTTPHead("httpupgrade", t, t.Path, host)
	if err != nil {
		return nil, err
	}
	return &upgradeConfig{head: h, grace: hijackGrace}, nil
}

// open sends the upgrade request over c, waits for the 101 and then for the
// grace, so that nothing the caller writes reaches the server before it is
// ready for the raw stream.
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
	if err == nil {
		err = settle(ctx, u.grace)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	return out, nil
}

// settle waits d, or until ctx ends.
func settle(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("httpupgrade handshake: %w", context.Cause(ctx))
	}
}
