package relay

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// spliceFailedAtDst says whether a failed splice from src to dst failed on
// dst. The standard library's splice reports one error for both of its
// halves, so the sockets are asked instead: a reset, a timeout or an
// error that ended a connection leaves its socket closed (TCP_CLOSE), while
// the other stays as it was. When neither (or both) tells, a broken pipe is
// a write's error, and anything else is taken as the read's.
func spliceFailedAtDst(src, dst *net.TCPConn, err error) bool {
	srcClosed, srcOK := tcpClosed(src)
	dstClosed, dstOK := tcpClosed(dst)
	switch {
	case srcOK && dstOK && srcClosed != dstClosed:
		return dstClosed
	case !srcOK && dstOK && dstClosed, srcOK && !dstOK && !srcClosed:
		return true
	}
	return errors.Is(err, syscall.EPIPE)
}

// tcpClosed reports whether c's socket is in state TCP_CLOSE; ok is false
// when that could not be asked (the conn was closed meanwhile).
func tcpClosed(c *net.TCPConn) (closed, ok bool) {
	rc, err := c.SyscallConn()
	if err != nil {
		return false, false
	}
	var state uint8
	var serr error
	if err := rc.Control(func(fd uintptr) {
		var info *unix.TCPInfo
		info, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if serr == nil {
			state = info.State
		}
	}); err != nil || serr != nil {
		return false, false
	}
	return state == tcpClose, true
}

// tcpClose is TCP_CLOSE, the state of a socket whose connection is over
// (the kernel's tcp_states.h).
const tcpClose = 7
