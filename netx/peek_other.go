//go:build !linux

package netx

import (
	"net/netip"
	"syscall"
)

// recvFrom takes the datagram waiting on fd into b, without waiting, and
// returns its length and sender (unmapped; invalid for a sender that is no
// IP address), or EAGAIN when none is waiting. Here it allocates the
// sender's address.
func recvFrom(fd uintptr, b []byte) (int, netip.AddrPort, error) {
	for {
		n, sa, err := syscall.Recvfrom(int(fd), b, syscall.MSG_DONTWAIT)
		switch err {
		case nil:
			return n, sockaddrOf(sa), nil
		case syscall.EINTR:
			continue
		}
		return 0, netip.AddrPort{}, err
	}
}

func sockaddrOf(sa syscall.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *syscall.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *syscall.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// peekFrom returns the size of the datagram waiting on fd without taking
// it (here not known, so reported as the largest) and its sender,
// unmapped, or an invalid address for a sender that is no IP address. Here it
// allocates the sender's address.
func peekFrom(fd uintptr) (int, netip.AddrPort, error) {
	var b [1]byte
	for {
		_, sa, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		switch err {
		case nil:
			return MaxBuf, sockaddrOf(sa), nil
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
