//go:build !linux

package relay

import (
	"errors"
	"net"
	"syscall"
)

// spliceFailedAtDst says whether a failed copy between two TCP sockets
// failed on dst: a broken pipe is a write's error, anything else is taken
// as the read's.
func spliceFailedAtDst(_, _ *net.TCPConn, err error) bool {
	return errors.Is(err, syscall.EPIPE)
}
