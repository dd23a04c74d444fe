package netx

import (
	"net/netip"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// PollSources hands both sockets to a Poller (netx.PollableLink): each
// read takes one datagram waiting on its socket, from whichever family,
// with no goroutine of the link's own. A family not in use has nothing to
// read. Nothing is returned once the link is closed.
func (u *DualUDP) PollSources(closed func()) []PollSource {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed || u.polled {
		return nil
	}
	var srcs []PollSource
	for _, c := range u.socks {
		if c == nil {
			continue
		}
		rc, err := c.SyscallConn()
		if err != nil {
			return nil
		}
		srcs = append(srcs, PollSource{Conn: rc, Read: newPolledRead(rc).read})
	}
	u.polled, u.closedHook = true, closed
	for _, c := range u.socks {
		if c != nil {
			c.SetReadDeadline(time.Time{}) // use's wake-up is for a reader of its own
		}
	}
	return srcs
}

// polledRead is one socket's read for a Poller: its fields carry the
// call's arguments and results through RawConn.Read, whose function is
// made once, so a read allocates nothing.
type polledRead struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool
	p    []byte
	n    int
	from netip.AddrPort
	err  error
}

func newPolledRead(rc syscall.RawConn) *polledRead {
	r := &polledRead{rc: rc}
	r.fn = r.recv
	return r
}

func (r *polledRead) recv(fd uintptr) bool {
	r.n, r.from, r.err = recvFrom(fd, r.p)
	return true
}

func (r *polledRead) read(p []byte) (int, Addr, error) {
	r.p = p
	err := r.rc.Read(r.fn)
	r.p = nil
	switch {
	case err != nil:
		return 0, Addr{}, err // closed
	case r.err == unix.EAGAIN:
		return 0, Addr{}, ErrWouldBlock
	case r.err != nil:
		return 0, Addr{}, os.NewSyscallError("recvfrom", r.err)
	}
	return r.n, AddrFromAddrPort(r.from), nil
}
