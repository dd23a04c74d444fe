//go:build !linux

package netx

import (
	"net/netip"
	"syscall"
)

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

// peekFrom is peekSize that also returns the datagram's sender, unmapped,
// or an invalid address for a sender that is no IP address. Here it
// allocates the sender's address.
func peekFrom(fd uintptr) (int, netip.AddrPort, error) {
	var b [1]byte
	for {
		_, sa, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch err {
		case nil:
			switch sa := sa.(type) {
			case *syscall.SockaddrInet4:
				return MaxBuf, netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)), nil
			case *syscall.SockaddrInet6:
				return MaxBuf, netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port)), nil
			}
			return MaxBuf, netip.AddrPort{}, nil
		case syscall.EINTR:
			continue
		}
		return 0, netip.AddrPort{}, err
	}
}

// discardNext takes the datagram waiting on fd off the socket: a read of
// one byte drops the rest of a datagram.
func discardNext(fd uintptr) {
	var b [1]byte
	for {
		if _, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_DONTWAIT); err != syscall.EINTR {
			return
		}
	}
}
