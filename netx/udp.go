package netx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
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
	u := &DualUDP{in: make(chan inbound), stop: make(chan struct{})}
	for _, f := range families {
		c, err := d.ListenUDP(ctx, f)
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
	for _, c := range u.socks {
		if c != nil {
			u.wg.Add(1)
			go u.read(c)
		}
	}
	return u, nil
}

// DualUDP is up to one UDP socket per family, read as one link. It sends
// only to IP destinations; resolving names is the caller's policy.
type DualUDP struct {
	socks [2]*net.UDPConn // by Family
	in    chan inbound    // datagrams handed from the readers to ReadFrom
	stop  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
}

type inbound struct {
	b    []byte
	from netip.AddrPort
	err  error
	done chan struct{}
}

// Socket returns the socket of family f, or nil.
func (u *DualUDP) Socket(f Family) *net.UDPConn { return u.socks[f] }

// WriteTo sends p to the IP destination to from the socket of its family.
func (u *DualUDP) WriteTo(p []byte, to netip.AddrPort) error {
	to = netip.AddrPortFrom(to.Addr().Unmap(), to.Port())
	c := u.socks[FamilyOf(to.Addr())]
	if c == nil {
		return fmt.Errorf("udp: no local socket in the family of %s", to)
	}
	_, err := c.WriteToUDPAddrPort(p, to)
	return err
}

// ReadFrom returns the next datagram from either socket.
func (u *DualUDP) ReadFrom(p []byte) (int, netip.AddrPort, error) {
	select {
	case d := <-u.in:
		n := copy(p, d.b)
		err := d.err
		from := d.from
		d.done <- struct{}{}
		return n, from, err
	case <-u.stop:
		return 0, netip.AddrPort{}, net.ErrClosed
	}
}

const maxDatagram = 64 * 1024

func (u *DualUDP) read(c *net.UDPConn) {
	defer u.wg.Done()
	buf := make([]byte, maxDatagram)
	done := make(chan struct{})
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return // closed, or the socket failed: the other family goes on
		}
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		select {
		case u.in <- inbound{b: buf[:n], from: from, done: done}:
			<-done
		case <-u.stop:
			return
		}
	}
}

// Close closes both sockets and waits for the readers.
func (u *DualUDP) Close() error {
	var errs []error
	u.once.Do(func() {
		close(u.stop)
		for _, c := range u.socks {
			if c != nil {
				errs = append(errs, c.Close())
			}
		}
		u.wg.Wait()
	})
	return errors.Join(errs...)
}
