package serve

import (
	"context"
	"errors"
	"net"
	"syscall"
	"time"

	"switchyard/netx"
)

// ErrClientGone is the cause of a dial cancelled because its client hung
// up while it ran.
var ErrClientGone = errors.New("the client went away")

// watchAfter is how long a dial runs before its client is watched: most
// dials are done sooner, and then cost no watcher at all.
const watchAfter = 50 * time.Millisecond

// WhileConnected runs dial under a context that ends as soon as the client
// on c hangs up (its FIN or reset arrives), so a dial nobody waits for any
// more stops at once and frees what it holds. The client is watched once
// the dial has run for watchAfter. Bytes the client sends meanwhile prove
// it is there: watching stops and they stay unread. c's read deadline is
// cleared afterwards.
func WhileConnected(ctx context.Context, c net.Conn, dial func(context.Context) (net.Conn, error)) (net.Conn, error) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return dial(ctx)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return dial(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	watch := time.AfterFunc(watchAfter, func() {
		defer close(done)
		if hungUp(rc) {
			cancel(ErrClientGone)
		}
	})
	up, err := dial(ctx)
	if !watch.Stop() {
		// The watcher started: wake it and wait for it, so that nothing
		// reads c's socket once this returns.
		c.SetReadDeadline(netx.LongAgo)
		<-done
		c.SetReadDeadline(time.Time{})
	}
	return up, err
}

// hungUp waits until the socket is readable and reports whether what is
// there is the peer's end (or an error) rather than data. It returns false
// when woken by a read deadline.
func hungUp(rc syscall.RawConn) bool {
	var (
		buf  [1]byte
		gone bool
	)
	err := rc.Read(func(fd uintptr) bool {
		n, _, err := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch {
		case err == syscall.EAGAIN || err == syscall.EINTR:
			return false // nothing yet: wait for readability
		case err != nil, n == 0:
			gone = true
		}
		return true
	})
	return err == nil && gone
}
