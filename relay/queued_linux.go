package relay

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// canWaitQueued: the copy path may wait for bytes on a plain TCP source
// before it takes a buffer.
const canWaitQueued = true

// waitQueued waits, under the conn's read deadline, until the socket has
// bytes to read or has reached its end, and returns how many bytes are queued
// (0 at the end of the stream).
func waitQueued(rc syscall.RawConn) (int, error) {
	var queued int
	var serr error
	err := rc.Read(func(fd uintptr) bool {
		n, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ)
		if err != nil {
			serr = err
			return true
		}
		if n > 0 {
			queued = n
			return true
		}
		// Nothing queued: either nothing yet, or the end of the stream.
		var b [1]byte
		m, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			return false // wait for readiness
		case err != nil:
			serr = err
			return true
		}
		queued = m
		return true
	})
	if err != nil {
		return 0, err
	}
	return queued, serr
}
