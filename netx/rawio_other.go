//go:build !linux

package netx

import (
	"io"
	"net"
	"net/netip"
	"syscall"
)

// sendDatagram sends p to the IP destination to on c.
func sendDatagram(c *net.UDPConn, p []byte, to netip.AddrPort) error {
	_, err := c.WriteToUDPAddrPort(p, to)
	return err
}

// ReadNonblocking reads fd, a non-blocking descriptor, into b once.
func ReadNonblocking(fd uintptr, b []byte) (int, error) {
	for {
		n, err := syscall.Read(int(fd), b)
		if err != syscall.EINTR {
			return n, err
		}
	}
}

// NonblockingWriter writes to a non-blocking descriptor, waiting in the
// poller while it is full.
func NonblockingWriter(rc syscall.RawConn) io.Writer { return rawWriter{rc} }

type rawWriter struct{ rc syscall.RawConn }

func (w rawWriter) Write(b []byte) (int, error) {
	var n int
	var werr error
	err := w.rc.Write(func(fd uintptr) bool {
		for {
			n, werr = syscall.Write(int(fd), b)
			if werr != syscall.EINTR {
				return werr != syscall.EAGAIN
			}
		}
	})
	if err == nil {
		err = werr
	}
	return max(n, 0), err
}
