package netx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Family is an IP address family.
type Family uint8

const (
	V4 Family = iota
	V6
)

func (f Family) String() string {
	if f == V6 {
		return "V6"
	}
	return "V4"
}

// FamilyOf returns the family of ip (IPv4-mapped addresses are IPv4).
func FamilyOf(ip netip.Addr) Family {
	if ip.Unmap().Is4() {
		return V4
	}
	return V6
}

// ListenUDP binds one UDP socket of family f under the policy: to the
// policy's bind address of that family, or the wildcard. An IPv6 socket is
// v6-only, so IPv4 traffic never arrives on it as mapped addresses.
func (d *Dialer) ListenUDP(ctx context.Context, f Family) (*net.UDPConn, error) {
	lc := net.ListenConfig{Control: d.Policy.Control}
	network, addr := "udp4", "0.0.0.0:0"
	if f == V6 {
		network, addr = "udp6", "[::]:0"
	}
	if b := d.Policy.bindFor(f == V4); b.IsValid() {
		addr = netip.AddrPortFrom(b, 0).String()
	}
	pc, err := lc.ListenPacket(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return pc.(*net.UDPConn), nil
}

// ErrNoFamily is returned by BindDual called without a family.
var ErrNoFamily = errors.New("udp: no address family requested")

// ErrNoLocalSocket is returned when no requested family binds.
var ErrNoLocalSocket = errors.New("udp: no usable local socket in any requested family")

// BindDual binds up to one UDP socket per requested family. A family whose
// bind fails is left out with a debug line; the call fails only when nothing
// binds.
func (d *Dialer) BindDual(ctx context.Context, families []Family, log *slog.Logger) (*DualUDP, error) {
	if len(families) == 0 {
		return nil, ErrNoFamily
	}
	u := &DualUDP{wake: make(chan struct{}, 1), stop: make(chan struct{})}
	for _, f := range families {
		c, err := d.ListenUDP(ctx, f)
		if err == nil {
			u.waits[f], err = NewDatagramWaiter(c)
			if err != nil {
				c.Close()
			}
		}
		if err != nil {
			if log != nil {
				log.Debug(fmt.Sprintf("udp: no %s socket: %v", f, err))
			}
			continue
		}
		u.socks[f] = c
	}
	if u.socks[V4] == nil && u.socks[V6] == nil {
		return nil, ErrNoLocalSocket
	}
	return u, nil
}

// DualUDP is up to one UDP socket per family, read as one link. It sends
// only to IP destinations; resolving names is the caller's policy.
//
// Only the families a datagram went out of are read: nothing else can
// answer. While that is one family, ReadFrom reads its socket itself, on
// the caller's goroutine; once both are in use, one goroutine per family
// reads and hands datagrams over. Readers take a buffer only once a
// datagram is waiting (WaitPacket, then ReadFrom; or GetBuf in the
// goroutines), so an idle link holds none. Or a Poller reads both sockets
// instead of any reader (PollSources, udp_poll_linux.go).
type DualUDP struct {
	socks [2]*net.UDPConn // by Family
	waits [2]*DatagramWaiter
	used  [2]atomic.Bool // a datagram went out of the family's socket
	// unsegmented: the kernel refused a segmented send (segment.go).
	unsegmented atomic.Bool
	wake        chan struct{} // a family came into use; capacity 1
	stop        chan struct{} // closed by Close

	once   sync.Once
	mu     sync.Mutex // guards closed, the start of readers, polled and closedHook
	closed bool
	// polled: a Poller reads the sockets (PollSources); closedHook tells
	// it the link closed.
	polled     bool
	closedHook func()
	wg         sync.WaitGroup // the per-family readers once both are in use

	// The state of the link's reader (ReadFrom and WaitPacket are called by
	// one goroutine at a time).
	merged  bool         // both families in use: in carries their datagrams
	in      chan inbound // from the per-family readers
	next    inbound      // a datagram WaitPacket took from in, for ReadFrom
	hasNext bool
	idle    func() // NotifyIdle's
}

type inbound struct {
	b    []byte
	from netip.AddrPort
	done chan struct{}
}

// Socket returns the socket of family f, or nil.
func (u *DualUDP) Socket(f Family) *net.UDPConn { return u.socks[f] }

// WriteTo sends p to the IP destination to from the socket of its family.
func (u *DualUDP) WriteTo(p []byte, to netip.AddrPort) error {
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	f := FamilyOf(to.Addr())
	c := u.socks[f]
	if c == nil {
		return errNoFamilySocket(to)
	}
	if !u.used[f].Load() {
		u.use(f)
	}
	return sendDatagram(c, p, to)
}

func errNoFamilySocket(to netip.AddrPort) error {
	return fmt.Errorf("udp: no local socket in the family of %s", to)
}

// use marks family f in use before its first datagram goes out, and wakes
// the reader: one waiting for any family, or one reading the other family
// alone, which now has to read both.
func (u *DualUDP) use(f Family) {
	if u.used[f].Swap(true) {
		return
	}
	select {
	case u.wake <- struct{}{}:
	default:
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if other := u.socks[1-f]; other != nil && u.used[1-f].Load() && !u.polled {
		other.SetReadDeadline(LongAgo)
	}
}

// NotifyIdle makes WaitPacket call idle each time no datagram is waiting,
// before it blocks (netx.IdleNotifier).
func (u *DualUDP) NotifyIdle(idle func()) bool {
	u.idle = idle
	return true
}

// WaitPacket waits for the next datagram from either family in use and
// returns its size, without taking it.
func (u *DualUDP) WaitPacket() (int, error) {
	for {
		if u.hasNext {
			return len(u.next.b), nil
		}
		c, f, ok := u.reading()
		switch {
		case !ok:
			return 0, net.ErrClosed
		case c == nil:
			select {
			case u.next = <-u.in:
				u.hasNext = true
				continue
			default:
			}
			if u.idle != nil {
				u.idle()
			}
			select {
			case u.next = <-u.in:
				u.hasNext = true
			case <-u.stop:
				return 0, net.ErrClosed
			}
			continue
		}
		n, err := u.waits[f].WaitIdle(u.idle)
		if u.woken(c, err) {
			continue
		}
		return n, err
	}
}

// ReadFrom returns the next datagram from either family in use.
func (u *DualUDP) ReadFrom(p []byte) (int, netip.AddrPort, error) {
	for {
		if u.hasNext {
			u.hasNext = false
			return u.handOver(p, u.next)
		}
		c, f, ok := u.reading()
		switch {
		case !ok:
			return 0, netip.AddrPort{}, net.ErrClosed
		case c == nil:
			select {
			case d := <-u.in:
				return u.handOver(p, d)
			case <-u.stop:
				return 0, netip.AddrPort{}, net.ErrClosed
			}
		}
		if n, from, ok := u.waits[f].Take(p); ok {
			return n, from, nil // the datagram WaitPacket took
		}
		n, from, err := c.ReadFromUDPAddrPort(p)
		if u.woken(c, err) {
			continue
		}
		return n, netip.AddrPortFrom(from.Addr().Unmap(), from.Port()), err
	}
}

func (u *DualUDP) handOver(p []byte, d inbound) (int, netip.AddrPort, error) {
	n := copy(p, d.b)
	d.done <- struct{}{}
	return n, d.from, nil
}

// reading returns the socket the reader reads itself and its family, or a
// nil socket once both families are read by their own goroutines (through
// in). It waits while no family is in use; ok is false once the link is
// closed.
func (u *DualUDP) reading() (c *net.UDPConn, f Family, ok bool) {
	for {
		if u.merged {
			return nil, 0, true
		}
		v4, v6 := u.used[V4].Load(), u.used[V6].Load()
		switch {
		case v4 && v6:
			if !u.merge() {
				return nil, 0, false
			}
			return nil, 0, true
		case v4:
			return u.socks[V4], V4, true
		case v6:
			return u.socks[V6], V6, true
		}
		select {
		case <-u.wake:
		case <-u.stop:
			return nil, 0, false
		}
	}
}

// woken reports whether err is the deadline use set to wake a read on c,
// which is then cleared for the next read.
func (u *DualUDP) woken(c *net.UDPConn, err error) bool {
	if err == nil || !errors.Is(err, os.ErrDeadlineExceeded) {
		return false
	}
	select {
	case <-u.stop:
		return false
	default:
	}
	c.SetReadDeadline(time.Time{})
	return true
}

// merge starts one reader per family; false once the link is closed.
func (u *DualUDP) merge() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.closed {
		return false
	}
	u.merged = true
	u.in = make(chan inbound)
	for f, c := range u.socks {
		c.SetReadDeadline(time.Time{})
		u.wg.Add(1)
		go u.read(Family(f))
	}
	return true
}

// read is the reader of family f once both are in use: it hands each
// datagram to ReadFrom and takes its buffer back once ReadFrom copied it.
func (u *DualUDP) read(f Family) {
	defer u.wg.Done()
	c := u.socks[f]
	done := make(chan struct{})
	for {
		_, err := u.waits[f].Wait()
		if u.woken(c, err) {
			continue
		}
		if err != nil {
			return // closed, or the socket failed: the other family goes on
		}
		bp, from, ok := u.waits[f].TakeBuf()
		if !ok {
			continue // a wait without error always holds one
		}
		select {
		case u.in <- inbound{b: *bp, from: from, done: done}:
			<-done
			PutBuf(bp)
		case <-u.stop:
			PutBuf(bp)
			return
		}
	}
}

// Close closes both sockets and waits for the readers.
func (u *DualUDP) Close() error {
	var errs []error
	u.once.Do(func() {
		u.mu.Lock()
		u.closed = true
		u.mu.Unlock()
		close(u.stop)
		for _, c := range u.socks {
			if c != nil {
				errs = append(errs, c.Close())
			}
		}
		u.wg.Wait()
		u.mu.Lock()
		hook := u.closedHook
		u.mu.Unlock()
		if hook != nil {
			hook()
		}
	})
	return errors.Join(errs...)
}
