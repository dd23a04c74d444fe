//go:build !linux

package netx

import "syscall"

// peekSize returns the size of the datagram waiting on fd without taking
// it, or EAGAIN when none is. Without Linux's MSG_TRUNC the size is not
// known, so it is reported as the largest.
func peekSize(fd uintptr) (int, error) {
	var b [1]byte
	for {
		_, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch err {
		case nil:
			return MaxBuf, nil
		case syscall.EINTR:
			continue
		}
		return 0, err
	}
}
