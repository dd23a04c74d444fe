package netx

import (
	"net"
	"net/netip"
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

	// Set by NewDatagramWaiterFrom.
	from    netip.AddrPort // the one sender, unmapped and without a zone
	dropped func(from netip.AddrPort)
	again   bool // fn dropped a batch: Wait calls it again
}

// dropBatch is how many datagrams of strangers one pass of a wait drops
// before it lets go of the socket (and Close or a deadline may act) and
// takes it again.
const dropBatch = 16

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

// NewDatagramWaiterFrom returns a waiter on c that waits for the datagrams
// of one sender, from (compared unmapped, port included, zone ignored): a
// datagram from any other address that comes first is taken off the socket
// and dropped inside the wait, which goes on. dropped, when not nil, is
// called with the sender of each datagram dropped (an invalid address for
// one that is no IP address), on the waiting goroutine; it must not use c.
//
// So a stranger's datagrams neither wake the waiter nor make the reader
// take a buffer for them. On Linux the sender is peeked into a sockaddr on
// the stack, and a wait, drops included, allocates nothing; elsewhere
// peeking the sender allocates.
func NewDatagramWaiterFrom(c *net.UDPConn, from netip.AddrPort, dropped func(from netip.AddrPort)) (*DatagramWaiter, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &DatagramWaiter{
		rc:      rc,
		from:    netip.AddrPortFrom(from.Addr().Unmap().WithZone(""), from.Port()),
		dropped: dropped,
	}
	w.fn = func(fd uintptr) bool {
		for range dropBatch {
			n, sender, err := peekFrom(fd)
			if err != nil {
				w.size, w.err = 0, err
				return err != syscall.EAGAIN
			}
			if sender == w.from {
				w.size, w.err = n, nil
				return true
			}
			discardNext(fd)
			if w.dropped != nil {
				w.dropped(sender)
			}
		}
		w.again = true
		return true
	}
	return w, nil
}

// Wait blocks until a datagram can be read from the socket and returns its
// size; with a sender (NewDatagramWaiterFrom), until one of its datagrams
// is next. It fails as a read would: once the socket is closed, when its
// read deadline passes, or with the socket's pending error.
func (w *DatagramWaiter) Wait() (int, error) {
	for {
		w.again = false
		if err := w.rc.Read(w.fn); err != nil {
			return 0, err
		}
		if !w.again {
			return w.size, w.err
		}
	}
}
