package probe

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
)

// chanLink is a PacketLink fed by the test: ReadPacket returns what in
// carries (or fail's error once closed), WritePacket records.
type chanLink struct {
	in     chan []byte
	fail   chan struct{}
	err    error
	closed chan struct{}
	once   sync.Once

	mu   sync.Mutex
	sent []netx.Addr
}

func newChanLink() *chanLink {
	return &chanLink{in: make(chan []byte), fail: make(chan struct{}), closed: make(chan struct{})}
}

func (l *chanLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	select {
	case d := <-l.in:
		return copy(p, d), netx.DomainAddr("elsewhere.test", 1), nil
	case <-l.fail:
		return 0, netx.Addr{}, l.err
	case <-l.closed:
		return 0, netx.Addr{}, net.ErrClosed
	}
}

func (l *chanLink) WritePacket(_ []byte, to netx.Addr) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent = append(l.sent, to)
	return nil
}

func (l *chanLink) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Datagrams read are the peer's, truncated to the buffer; writes go to the
// peer whatever they name.
func TestLinkConnPeer(t *testing.T) {
	l := newChanLink()
	peer := netx.DomainAddr(h3Host, 443)
	c := newLinkConn(l, peer)
	defer c.Close()
	go func() { l.in <- []byte("hello") }()
	buf := make([]byte, 3)
	n, from, err := c.ReadFrom(buf)
	if err != nil || string(buf[:n]) != "hel" || from.String() != "h3.test:443" || from.Network() != "udp" {
		t.Fatalf("%q from %v: %v", buf[:n], from, err)
	}
	if n, err := c.WriteTo([]byte("x"), &net.UDPAddr{IP: net.IPv4(9, 9, 9, 9), Port: 9}); n != 1 || err != nil {
		t.Fatalf("%d, %v", n, err)
	}
	if len(l.sent) != 1 || l.sent[0] != peer {
		t.Fatalf("sent to %v", l.sent)
	}
	ip := newLinkConn(newChanLink(), netx.AddrFromAddrPort(netip.MustParseAddrPort("[2001:db8::1]:443")))
	defer ip.Close()
	if a, ok := ip.peer.(*net.UDPAddr); !ok || a.String() != "[2001:db8::1]:443" {
		t.Fatalf("peer %#v", ip.peer)
	}
}

// The read deadline: a past one fails a pending read at once with
// os.ErrDeadlineExceeded (a net.Error that times out), a zero one lifts it,
// a future one fires.
func TestLinkConnDeadline(t *testing.T) {
	c := newLinkConn(newChanLink(), netx.DomainAddr(h3Host, 443))
	defer c.Close()
	got := make(chan error, 1)
	go func() { _, _, err := c.ReadFrom(make([]byte, 10)); got <- err }()
	time.Sleep(20 * time.Millisecond)
	c.SetReadDeadline(time.Now())
	select {
	case err := <-got:
		var ne net.Error
		if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("err %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a past deadline did not end the read")
	}
	c.SetReadDeadline(time.Time{})
	go func() { _, _, err := c.ReadFrom(make([]byte, 10)); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("read ended without a deadline: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(60 * time.Millisecond))
	if err := <-got; !errors.Is(err, os.ErrDeadlineExceeded) || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("err %v after %v", err, time.Since(start))
	}
	// Moving a pending deadline later keeps the read waiting.
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	c.SetReadDeadline(time.Now().Add(time.Hour))
	go func() { _, _, err := c.ReadFrom(make([]byte, 10)); got <- err }()
	select {
	case err := <-got:
		t.Fatalf("the replaced deadline fired: %v", err)
	case <-time.After(80 * time.Millisecond):
	}
	c.SetReadDeadline(time.Now())
	<-got
}

// Close ends a pending read with net.ErrClosed, closes the link and
// returns once the pump did; later reads and writes fail. A link that
// fails fails the reads with its error.
func TestLinkConnClose(t *testing.T) {
	l := newChanLink()
	c := newLinkConn(l, netx.DomainAddr(h3Host, 443))
	got := make(chan error, 1)
	go func() { _, _, err := c.ReadFrom(make([]byte, 10)); got <- err }()
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case <-c.pumped:
	default:
		t.Fatal("Close returned before the pump")
	}
	if err := <-got; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read: %v", err)
	}
	if _, err := c.WriteTo([]byte("x"), nil); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
	c.Close()

	l = newChanLink()
	l.err = errors.New("carrier gone")
	c = newLinkConn(l, netx.DomainAddr(h3Host, 443))
	defer c.Close()
	close(l.fail)
	if _, _, err := c.ReadFrom(make([]byte, 10)); !errors.Is(err, l.err) {
		t.Fatalf("read: %v", err)
	}
}
