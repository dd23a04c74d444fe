package netx

import (
	"context"
	"fmt"
	"net"
	"time"
)

// LongAgo is a deadline already past: setting it wakes blocked I/O.
var LongAgo = time.Unix(1, 0)

// Within runs a handshake step fn on c bound to ctx: c carries ctx's
// deadline while fn runs and an already-past one as soon as ctx ends; the
// deadline is cleared afterwards. When ctx ended before fn was done, or c's
// deadline (ctx's own) passed just before ctx's timer fired, the error
// matches ctx's (its cause, with fn's error beside it). Every handshake of
// every transport and protocol runs under it.
func Within(ctx context.Context, c net.Conn, fn func() error) error {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		c.SetDeadline(deadline)
	}
	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		c.SetDeadline(LongAgo)
		close(fired)
	})
	err := fn()
	if !stop() {
		// The callback ran or is running: wait for it, so that no deadline
		// lands on c after Within returns.
		<-fired
		if err == nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	c.SetDeadline(time.Time{})
	if err != nil && hasDeadline && !time.Now().Before(deadline) {
		if cause := context.Cause(ctx); cause != nil {
			return fmt.Errorf("%w (%w)", cause, err)
		}
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	return err
}
