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

// An IdleNotifier is a PacketWaiter that can tell its reader when it has
// taken every datagram that was waiting: the moment for a reader that
// batches what it receives to hand the batch on (PacketBatch).
type IdleNotifier interface {
	// NotifyIdle makes WaitPacket call idle, on the reader's goroutine,
	// each time it finds no datagram waiting, just before it blocks. The
	// reader calls it once, before its first WaitPacket; false means the
	// link cannot tell.
	NotifyIdle(idle func()) bool
}

// NotifyIdle asks l to call idle whenever its WaitPacket is about to block
// (IdleNotifier) and reports whether it will. Wrappers of a link forward it
// with this function.
func NotifyIdle(l PacketLink, idle func()) bool {
	if n, ok := l.(IdleNotifier); ok {
		return n.NotifyIdle(idle)
	}
	return false
}

// A DatagramWaiter waits for the datagrams of one UDP socket without
// holding a buffer meanwhile. One goroutine at a time uses it; a wait costs
// no allocation.
type DatagramWaiter struct {
	rc   syscall.RawConn
	fn   func(fd uintptr) bool // made once, so that a wait allocates nothing
	size int
	err  error

	// Set by NewDatagramWaiter: the datagram a wait took off the socket.
	held     *[]byte
	heldFrom netip.AddrPort
	idle     func() // during WaitIdle: called when the socket is empty

	// Set by NewDatagramWaiterFrom.
	from    netip.AddrPort // the one sender, unmapped and without a zone
	dropped func(from netip.AddrPort)
	again   bool // fn dropped a batch: Wait calls it again
}

// dropBatch is how many datagrams of strangers one pass of a wait drops
// before it lets go of the socket (and Close or a deadline may act) and
// takes it again.
const dropBatch = 16

// NewDatagramWaiter returns a waiter on c that takes each datagram off the
// socket as its wait ends, into a pooled buffer it holds until Take or
// TakeBuf: one system call a datagram, where peeking its size first and
// reading it after would be two. Every read of c after a wait has to be
// one of those.
func NewDatagramWaiter(c *net.UDPConn) (*DatagramWaiter, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	w := &DatagramWaiter{rc: rc}
	w.fn = func(fd uintptr) bool {
		if w.held != nil {
			w.size, w.err = len(*w.held), nil
			return true
		}
		bp := GetBuf(MaxBuf)
		n, from, err := recvFrom(fd, *bp)
		if err != nil {
			PutBuf(bp)
			w.size, w.err = 0, err
			if err != syscall.EAGAIN {
				return true
			}
			if w.idle != nil {
				w.idle()
			}
			return false
		}
		*bp = (*bp)[:n]
		w.held, w.heldFrom = bp, from
		w.size, w.err = n, nil
		return true
	}
	return w, nil
}

// Take copies the datagram the last wait took (truncated to p, as UDP
// does) and returns its length and sender; ok is false when none is held.
func (w *DatagramWaiter) Take(p []byte) (n int, from netip.AddrPort, ok bool) {
	bp, from, ok := w.TakeBuf()
	if !ok {
		return 0, from, false
	}
	n = copy(p, *bp)
	PutBuf(bp)
	return n, from, true
}

// TakeBuf hands over the datagram the last wait took, in its pooled buffer
// (sliced to its length, for PutBuf once used), and its sender; ok is false
// when none is held.
func (w *DatagramWaiter) TakeBuf() (bp *[]byte, from netip.AddrPort, ok bool) {
	bp, from = w.held, w.heldFrom
	w.held = nil
	return bp, from, bp != nil
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
// size: it is then held (NewDatagramWaiter), or, with a sender
// (NewDatagramWaiterFrom), one of its datagrams is next on the socket.
// It fails as a read would: once the socket is closed, when its read
// deadline passes, or with the socket's pending error.
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

// WaitIdle waits as Wait does and calls idle (when not nil) each time it
// finds the socket empty, just before it blocks; only a waiter made by
// NewDatagramWaiter calls it.
func (w *DatagramWaiter) WaitIdle(idle func()) (int, error) {
	w.idle = idle
	defer func() { w.idle = nil }()
	return w.Wait()
}
