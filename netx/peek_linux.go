package netx

import (
	"net/netip"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The calls here are raw (rawio_linux.go): the socket is non-blocking.
// The call numbers are x/sys/unix's, which has the socket calls of
// every Linux architecture (the syscall package has no recvfrom on 386).

// recvFrom takes the datagram waiting on fd into b, without waiting, and
// returns its length and sender (unmapped; invalid for a sender that is no
// IP address), or EAGAIN when none is waiting. The sender is read into a
// sockaddr on the stack: it allocates nothing.
func recvFrom(fd uintptr, b []byte) (int, netip.AddrPort, error) {
	var rsa syscall.RawSockaddrAny
	for {
		alen := uint32(syscall.SizeofSockaddrAny)
		n, _, errno := syscall.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)),
			syscall.MSG_DONTWAIT, uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&alen)))
		switch errno {
		case 0:
			return int(n), sockaddrAddrPort(&rsa), nil
		case syscall.EINTR:
			continue
		}
		return 0, netip.AddrPort{}, errno
	}
}

// peekFrom returns the size of the datagram waiting on fd without taking
// it (MSG_TRUNC makes Linux report the whole datagram's length though only
// one byte is copied) and its sender, unmapped, or an invalid address for
// a sender that is no IP address, or EAGAIN when none is waiting. The
// address is read into a sockaddr on the stack: it allocates nothing.
func peekFrom(fd uintptr) (int, netip.AddrPort, error) {
	var b [1]byte
	var rsa syscall.RawSockaddrAny
	for {
		alen := uint32(syscall.SizeofSockaddrAny)
		n, _, errno := syscall.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_TRUNC|syscall.MSG_DONTWAIT,
			uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&alen)))
		switch errno {
		case 0:
			return int(n), sockaddrAddrPort(&rsa), nil
		case syscall.EINTR:
			continue
		}
		return 0, netip.AddrPort{}, errno
	}
}

// sockaddrAddrPort is the address and port of an AF_INET or AF_INET6
// sockaddr, unmapped and without a zone.
func sockaddrAddrPort(rsa *syscall.RawSockaddrAny) netip.AddrPort {
	switch rsa.Addr.Family {
	case syscall.AF_INET:
		sa := (*syscall.RawSockaddrInet4)(unsafe.Pointer(rsa))
		port := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(port[0])<<8|uint16(port[1]))
	case syscall.AF_INET6:
		sa := (*syscall.RawSockaddrInet6)(unsafe.Pointer(rsa))
		port := (*[2]byte)(unsafe.Pointer(&sa.Port))
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr).Unmap(), uint16(port[0])<<8|uint16(port[1]))
	}
	return netip.AddrPort{}
}

// discardNext takes the datagram waiting on fd off the socket without
// reading it: one byte is copied, and MSG_TRUNC drops the rest.
func discardNext(fd uintptr) {
	var b [1]byte
	for {
		_, _, errno := syscall.RawSyscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&b[0])), 1,
			syscall.MSG_TRUNC|syscall.MSG_DONTWAIT, 0, 0)
		if errno != syscall.EINTR {
			return
		}
	}
}
