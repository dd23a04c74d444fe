package socks

import (
	"context"
	"fmt"
	"net"
	"time"
)

// longAgo is a deadline already past: setting it wakes a blocked read.
var longAgo = time.Unix(1, 0)

// within runs a handshake on c bound to ctx: c carries ctx's deadline while
// fn runs and an already-past one as soon as ctx is cancelled. The deadline
// is cleared afterwards. A handshake that failed because ctx ended returns
// an error matching ctx's.
func within(ctx context.Context, c net.Conn, fn func() error) error {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		c.SetDeadline(deadline)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.SetDeadline(longAgo)
		close(fired)
	})
	err := fn()
	if !stop() {
		<-fired
		if err == nil {
			return fmt.Errorf("socks handshake: %w", context.Cause(ctx))
		}
		return fmt.Errorf("socks handshake: %w (%w)", context.Cause(ctx), err)
	}
	c.SetDeadline(time.Time{})
	if err != nil && hasDeadline && !time.Now().Before(deadline) {
		// The socket's deadline fired just before ctx's own timer.
		return fmt.Errorf("socks handshake: %w (%w)", context.DeadlineExceeded, err)
	}
	return err
}
