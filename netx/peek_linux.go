package netx

import (
	"syscall"
	"unsafe"
)

// peekSize returns the size of the datagram waiting on fd without taking
// it, or EAGAIN when none is. MSG_TRUNC makes Linux report the whole
// datagram's length though only one byte is copied.
func peekSize(fd uintptr) (int, error) {
	var b [1]byte
	for {
		n, _, errno := syscall.Syscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_TRUNC|syscall.MSG_DONTWAIT, 0, 0)
		switch errno {
		case 0:
			return int(n), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}
