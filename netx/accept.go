package netx

import (
	"errors"
	"net"
	"syscall"
)

// TransientAccept reports whether an Accept error passes with time (a
// timeout, a full file table, a client's early reset), so that a listener
// should pause and accept again rather than stop.
func TransientAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
