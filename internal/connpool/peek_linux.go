package connpool

import (
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// probeFD tells, without taking a byte and without waiting, what a TCP
// socket holds: a peer that closed (FIN: a zero-byte read) or reset it (an
// error pending), bytes the peer sent, or nothing (still open, silent).
// Bytes followed by a FIN read as bytes; the socket's TCP state then tells
// the FIN (CLOSE_WAIT, not ESTABLISHED).
func probeFD(fd uintptr) probe {
	var b [1]byte
	for {
		n, _, errno := syscall.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno == syscall.EAGAIN:
			return probeOpen
		case errno != 0:
			return probeClosed
		case n == 0:
			return probeClosed
		}
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil || info.State != tcpEstablished {
			return probeClosed
		}
		return probeData
	}
}

// canProbe reports whether this platform can look into a socket.
const canProbe = true

// tcpEstablished is Linux's TCP_ESTABLISHED in tcp_info's state.
const tcpEstablished = 1
