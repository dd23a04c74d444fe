package netx

import (
	"io"
	"net"
	"net/netip"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The packet paths' system calls on non-blocking descriptors (a UDP
// socket's recvfrom, sendto and sendmsg, the TUN device's read and write)
// are made raw, without the runtime's system call entry and exit. None of
// them blocks: the descriptor is non-blocking, a call that would block
// returns EAGAIN and the caller waits in the poller, and each takes
// microseconds. The runtime's entry exists for calls that may block: it
// lets another thread take the processor, and when the process was idle
// it wakes the runtime's monitor thread (sysmon), which then polls every
// 20 µs until the process is idle again. A path that goes idle between
// packets, as one datagram in flight does, paid a wake-up of the monitor
// and its polls for each packet: a context switch, on CPUs the
// application shares. Without them, the monitor's sleeps (11% of the
// profile of bench/tun's one-in-flight UDP echo) left the profile, and
// the CPU per UDP packet of its pipelined echo fell 12% (2.19 µs to
// 1.91–1.94 in three runs on one machine); the one-in-flight rate itself
// stayed within its noise.
//
// A raw call keeps its thread's processor while it runs: only calls that
// cannot block belong here.

// ReadNonblocking reads fd, a non-blocking descriptor, into b once: the
// bytes read, or the call's error (EAGAIN when nothing is waiting; EINTR
// is retried).
func ReadNonblocking(fd uintptr, b []byte) (int, error) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
		switch e {
		case 0:
			return int(n), nil
		case unix.EINTR:
			continue
		}
		return 0, e
	}
}

// NonblockingWriter writes to a non-blocking descriptor with one raw
// write a Write, waiting in the poller while the descriptor is full. It
// is for descriptors that take every write whole (a TUN device, a
// datagram socket): a short write is returned as it is.
func NonblockingWriter(rc syscall.RawConn) io.Writer { return rawWriter{rc} }

type rawWriter struct{ rc syscall.RawConn }

func (w rawWriter) Write(b []byte) (int, error) {
	var n uintptr
	var e unix.Errno
	err := w.rc.Write(func(fd uintptr) bool {
		for {
			n, _, e = unix.RawSyscall(unix.SYS_WRITE, fd, uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
			if e != unix.EINTR {
				return e != unix.EAGAIN
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case e != 0:
		return 0, e
	}
	return int(n), nil
}

// sockaddr is room for an AF_INET or AF_INET6 socket address.
type sockaddr struct {
	raw unix.RawSockaddrInet6 // the larger of the two
}

// set writes to into s and returns the address's pointer and length; to
// is unmapped, its zone empty.
func (s *sockaddr) set(to netip.AddrPort) (unsafe.Pointer, uintptr) {
	p := unsafe.Pointer(&s.raw)
	port := (*[2]byte)(unsafe.Pointer(&s.raw.Port))
	port[0], port[1] = byte(to.Port()>>8), byte(to.Port())
	if a := to.Addr(); a.Is4() {
		sa := (*unix.RawSockaddrInet4)(p)
		sa.Family = unix.AF_INET
		sa.Addr = a.As4()
		return p, unix.SizeofSockaddrInet4
	}
	s.raw.Family = unix.AF_INET6
	s.raw.Addr = to.Addr().As16()
	return p, unix.SizeofSockaddrInet6
}

// sendDatagram sends p to the IP destination to (unmapped, of c's family) on c.
// A destination with a zone goes through the net package, which turns the
// zone into the interface's index.
func sendDatagram(c *net.UDPConn, p []byte, to netip.AddrPort) error {
	if to.Addr().Zone() != "" {
		_, err := c.WriteToUDPAddrPort(p, to)
		return err
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var s sockaddr
	sa, salen := s.set(to)
	var e unix.Errno
	err = rc.Write(func(fd uintptr) bool {
		for {
			_, _, e = unix.RawSyscall6(unix.SYS_SENDTO, fd, uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)), 0, uintptr(sa), salen)
			if e != unix.EINTR {
				return e != unix.EAGAIN
			}
		}
	})
	if err == nil && e != 0 {
		err = os.NewSyscallError("sendto", e)
	}
	if err != nil {
		return &net.OpError{Op: "write", Net: "udp", Addr: net.UDPAddrFromAddrPort(to), Err: err}
	}
	return nil
}

// sendmsg sends the datagrams ps with the control message oob to to
// (unmapped, no zone) in one raw sendmsg on fd.
func sendmsg(fd uintptr, ps [][]byte, oob []byte, to netip.AddrPort) unix.Errno {
	if len(ps) == 0 || len(ps) > segmentMaxCount {
		return unix.EINVAL
	}
	var iovs [segmentMaxCount]unix.Iovec
	for i, p := range ps {
		iovs[i].Base = unsafe.SliceData(p)
		iovs[i].SetLen(len(p))
	}
	var s sockaddr
	sa, salen := s.set(to)
	msg := unix.Msghdr{Name: (*byte)(sa), Namelen: uint32(salen), Iov: &iovs[0], Control: unsafe.SliceData(oob)}
	msg.SetIovlen(len(ps))
	msg.SetControllen(len(oob))
	for {
		_, _, e := unix.RawSyscall(unix.SYS_SENDMSG, fd, uintptr(unsafe.Pointer(&msg)), 0)
		if e != unix.EINTR {
			return e
		}
	}
}
