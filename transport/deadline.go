package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// longAgo is a deadline already past: setting it wakes a blocked call.
var longAgo = time.Unix(1, 0)

// within runs a handshake step on c bound to ctx: c carries ctx's deadline
// while fn runs and an already-past one as soon as ctx ends. The deadline is
// cleared afterwards.
func within(ctx context.Context, c net.Conn, fn func() error) error {
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		c.SetDeadline(deadline)
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(longAgo) })
	err := fn()
	if !stop() {
		if err == nil {
			err = errors.New("cancelled")
		}
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	c.SetDeadline(time.Time{})
	if err != nil && hasDeadline && !time.Now().Before(deadline) {
		// The socket's deadline fired just before ctx's own timer.
		return fmt.Errorf("%w (%w)", context.DeadlineExceeded, err)
	}
	return err
}
