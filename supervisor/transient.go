package supervisor

import (
	"errors"
	"syscall"
)

// isTransient reports whether an Accept error passes with time (a full file
// table, a client's early reset).
func isTransient(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
