package netx

import (
	"net"
	"syscall"
)

// A PacketWaiter is a PacketLink that can wait for its next datagram
// without taking it, so that its reader holds no buffer while it waits.
type PacketWaiter interface {
	// WaitPacket blocks until a datagram can be read and returns its size,
	// or the error the next ReadPacket would return. The size may be an
	// upper bound of what that ReadPacket returns (a link that strips a
	// header counts it; MaxBuf when the link cannot tell), never less: a
	// buffer of that size takes the datagram whole. It is called by the
	// link's reader only, each time before its ReadPacket, never
	// concurrently with it; Close may run meanwhile and ends the wait.
	WaitPacket() (int, error)
}

// WaitPacket waits for l's next datagram when l can (PacketWaiter) and
// returns its size, or an upper bound of it; for any other link it returns MaxBuf at once, and the
// reader then waits in ReadPacket with a buffer of that size. Wrappers of a
// link forward it with this function.
func WaitPacket(l PacketLink) (int, error) {
	if w, ok := l.(PacketWaiter); ok {
		return w.WaitPacket()
	}
	return MaxBuf, nil
}

// A DatagramWaiter waits for the datagrams of one UDP socket without
// holding a buffer meanwhile. One goroutine at a time uses it; a wait costs
// no allocation.
type DatagramWaiter struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool // made once, so that a wait allocates nothing
	size int
	err  error
}

// NewDatagramWaiter returns a waiter on c.
func NewDatagramWaiter(c *net.UDPConn) (*DatagramWaiter, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &DatagramWaiter{rc: rc}
	w.fn = func(fd uintptr) bool {
		w.size, w.err = peekSize(fd)
		return w.err != syscall.EAGAIN
	}
	return w, nil
}

// Wait blocks until a datagram can be read from the socket and returns its
// size. It fails as a read would: once the socket is closed, when its read
// deadline passes, or with the socket's pending error.
func (w *DatagramWaiter) Wait() (int, error) {
	if err := w.rc.Read(w.fn); err != nil {
		return 0, err
	}
	return w.size, w.err
}
