package supervisor

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"switchyard/netx"
)

// routedDialer opens the sockets of the DNS queries asked through the route
// table (through_proxy): each is a flow like any other, routed by the rules
// on the plane current when it opens, with no inbound (so the plane's
// port-53 interception does not hand it back to the DNS service).
type routedDialer struct{ conn *connector }

func (d routedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	dst, err := netx.ParseAddr(address)
	if err != nil {
		return nil, err
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
		return d.conn.ConnectStream(ctx, netx.Flow{Network: netx.TCP, Dst: dst})
	case "udp", "udp4", "udp6":
		link := d.conn.OpenAssociation(netx.Flow{Network: netx.UDP, Dst: dst})
		return newLinkConn(link, dst), nil
	}
	return nil, fmt.Errorf("routed dns dialer: unknown network %q", network)
}

// linkConn is a datagram link used as a connected UDP socket toward one
// peer: one datagram per Write and per Read, deadlines honoured. A reader
// goroutine of its own hands the link's datagrams over; Close ends it.
type linkConn struct {
	link netx.PacketLink
	peer netx.Addr
	in   chan []byte
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	deadline time.Time
	err      error // the link's read error, once it ended
}

func newLinkConn(link netx.PacketLink, peer netx.Addr) *linkConn {
	c := &linkConn{link: link, peer: peer, in: make(chan []byte, 4), done: make(chan struct{})}
	go c.pump()
	return c
}

// pump reads the link until it ends; datagrams past a full queue are
// dropped, as a socket's full buffer drops them.
func (c *linkConn) pump() {
	buf := make([]byte, netx.MaxBuf)
	for {
		n, _, err := c.link.ReadPacket(buf)
		if err != nil {
			c.mu.Lock()
			c.err = err
			c.mu.Unlock()
			close(c.in)
			return
		}
		select {
		case c.in <- append([]byte(nil), buf[:n]...):
		default:
		}
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
func (timeoutError) Unwrap() error   { return os.ErrDeadlineExceeded }

func (c *linkConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	dl := c.deadline
	c.mu.Unlock()
	var expire <-chan time.Time
	if !dl.IsZero() {
		d := time.Until(dl)
		if d <= 0 {
			return 0, &net.OpError{Op: "read", Net: "udp", Err: timeoutError{}}
		}
		t := time.NewTimer(d)
		defer t.Stop()
		expire = t.C
	}
	select {
	case b, ok := <-c.in:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			if err == nil {
				err = net.ErrClosed
			}
			return 0, err
		}
		return copy(p, b), nil
	case <-expire:
		return 0, &net.OpError{Op: "read", Net: "udp", Err: timeoutError{}}
	case <-c.done:
		return 0, net.ErrClosed
	}
}

func (c *linkConn) Write(p []byte) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	if err := c.link.WritePacket(p, c.peer); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *linkConn) Close() error {
	var err error
	c.once.Do(func() {
		close(c.done)
		err = c.link.Close()
	})
	return err
}

func (c *linkConn) LocalAddr() net.Addr { return &net.UDPAddr{} }
func (c *linkConn) RemoteAddr() net.Addr {
	if ap, ok := c.peer.AddrPort(); ok {
		return net.UDPAddrFromAddrPort(ap)
	}
	return &net.UDPAddr{}
}

func (c *linkConn) SetDeadline(t time.Time) error { return c.SetReadDeadline(t) }
func (c *linkConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	c.mu.Unlock()
	return nil
}
func (c *linkConn) SetWriteDeadline(time.Time) error { return nil }

var _ net.Conn = (*linkConn)(nil)
