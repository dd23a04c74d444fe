package netx

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"
)

// listenUDP is a socket on network's loopback (or wildcard) address addr.
func listenUDP(t *testing.T, network, addr string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP(network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr)))
	if err != nil {
		t.Skipf("no %s socket on %s: %v", network, addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func addrOf(c *net.UDPConn) netip.AddrPort { return c.LocalAddr().(*net.UDPAddr).AddrPort() }

// sendTo sends p to to from c.
func sendTo(t *testing.T, c *net.UDPConn, p []byte, to netip.AddrPort) {
	t.Helper()
	if _, err := c.WriteToUDPAddrPort(p, to); err != nil {
		t.Fatal(err)
	}
}

// drops records the senders a waiter dropped.
type drops struct {
	mu   sync.Mutex
	from []netip.AddrPort
}

func (d *drops) add(from netip.AddrPort) {
	d.mu.Lock()
	d.from = append(d.from, from)
	d.mu.Unlock()
}

func (d *drops) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.from)
}

type waitResult struct {
	n   int
	err error
}

func waitOn(w *DatagramWaiter) <-chan waitResult {
	c := make(chan waitResult, 1)
	go func() {
		n, err := w.Wait()
		c <- waitResult{n, err}
	}()
	return c
}

// A waiter for one sender drops, inside the wait, the datagrams of
// everyone else (more than a batch of them), reporting each: they do not
// wake it. The sender's datagram does, with its size, and is the next read.
func TestDatagramWaiterFromDropsStrangers(t *testing.T) {
	sock := listenUDP(t, "udp4", "127.0.0.1:0")
	relay := listenUDP(t, "udp4", "127.0.0.1:0")
	stranger := listenUDP(t, "udp4", "127.0.0.1:0")
	var d drops
	w, err := NewDatagramWaiterFrom(sock, addrOf(relay), d.add)
	if err != nil {
		t.Fatal(err)
	}
	const junk = 2*dropBatch + 3
	for range junk {
		sendTo(t, stranger, make([]byte, 1000), addrOf(sock))
	}
	c := waitOn(w)
	select {
	case r := <-c:
		t.Fatalf("a stranger's datagrams woke the waiter: %d, %v", r.n, r.err)
	case <-time.After(100 * time.Millisecond):
	}
	if n := d.count(); n != junk {
		t.Fatalf("%d datagrams reported dropped, want %d", n, junk)
	}
	for _, from := range d.from {
		if from != addrOf(stranger) {
			t.Fatalf("a drop reported from %v, want %v", from, addrOf(stranger))
		}
	}
	sendTo(t, relay, []byte("from the relay"), addrOf(sock))
	select {
	case r := <-c:
		if r.err != nil || r.n != len("from the relay") {
			t.Fatalf("Wait = %d, %v", r.n, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the sender's datagram did not end the wait")
	}
	// The sender's datagram is next, then a stranger's that came after it
	// is dropped by the next wait.
	sendTo(t, stranger, []byte("late"), addrOf(sock))
	buf := make([]byte, 100)
	n, from, err := sock.ReadFromUDPAddrPort(buf)
	if err != nil || from != addrOf(relay) || string(buf[:n]) != "from the relay" {
		t.Fatalf("read %q from %v, %v", buf[:n], from, err)
	}
	sendTo(t, relay, []byte("again"), addrOf(sock))
	if n, err := w.Wait(); err != nil || n != len("again") {
		t.Fatalf("Wait = %d, %v", n, err)
	}
	if n := d.count(); n != junk+1 {
		t.Fatalf("%d datagrams reported dropped, want %d", n, junk+1)
	}
}

// The sender is matched unmapped and by port: on a dual-stack socket, an
// IPv4 relay's datagrams (which arrive from a mapped address) are its, and
// another port of the same address is a stranger.
func TestDatagramWaiterFromMatchesUnmapped(t *testing.T) {
	sock := listenUDP(t, "udp", "[::]:0")
	relay := listenUDP(t, "udp4", "127.0.0.1:0")
	other := listenUDP(t, "udp4", "127.0.0.1:0")
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addrOf(sock).Port())
	var d drops
	w, err := NewDatagramWaiterFrom(sock, netip.AddrPortFrom(netip.MustParseAddr("::ffff:127.0.0.1"), addrOf(relay).Port()), d.add)
	if err != nil {
		t.Fatal(err)
	}
	sendTo(t, other, []byte("x"), to)
	sendTo(t, relay, []byte("yes"), to)
	if n, err := w.Wait(); err != nil || n != 3 {
		t.Fatalf("Wait = %d, %v", n, err)
	}
	if d.count() != 1 || d.from[0] != addrOf(other) {
		t.Fatalf("dropped %v, want one from %v", d.from, addrOf(other))
	}
}

// A wait for one sender ends as a read would: at the read deadline, which
// may be set again, and at Close.
func TestDatagramWaiterFromEnds(t *testing.T) {
	sock := listenUDP(t, "udp4", "127.0.0.1:0")
	stranger := listenUDP(t, "udp4", "127.0.0.1:0")
	w, err := NewDatagramWaiterFrom(sock, netip.MustParseAddrPort("127.0.0.1:9"), nil)
	if err != nil {
		t.Fatal(err)
	}
	sendTo(t, stranger, []byte("junk"), addrOf(sock))
	sock.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	if _, err := w.Wait(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Wait past the deadline: %v", err)
	}
	sock.SetReadDeadline(time.Time{})
	c := waitOn(w)
	time.Sleep(20 * time.Millisecond)
	sock.Close()
	select {
	case r := <-c:
		if !errors.Is(r.err, net.ErrClosed) {
			t.Fatalf("Wait after Close: %d, %v", r.n, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the wait")
	}
}

// A plain waiter's wait takes the datagram off the socket, so that it
// costs one system call, and holds it for Take: the socket has nothing
// left to read, and Take returns the datagram and its sender once.
func TestDatagramWaiterTakesTheDatagram(t *testing.T) {
	c := listenUDP(t, "udp4", "127.0.0.1:0")
	peer := listenUDP(t, "udp4", "127.0.0.1:0")
	w, err := NewDatagramWaiter(c)
	if err != nil {
		t.Fatal(err)
	}
	sendTo(t, peer, []byte("first"), addrOf(c))
	if n, err := w.Wait(); n != 5 || err != nil {
		t.Fatalf("wait: %d, %v", n, err)
	}
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, _, err := c.ReadFromUDPAddrPort(make([]byte, 64)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the socket still had %d bytes to read (%v)", n, err)
	}
	c.SetReadDeadline(time.Time{})
	// A second wait before Take reports the datagram held.
	if n, err := w.Wait(); n != 5 || err != nil {
		t.Fatalf("second wait: %d, %v", n, err)
	}
	p := make([]byte, 3)
	n, from, ok := w.Take(p)
	if !ok || n != 3 || string(p) != "fir" || from != addrOf(peer) {
		t.Fatalf("take: %v %d %q from %s", ok, n, p, from)
	}
	if _, _, ok := w.Take(p); ok {
		t.Fatal("a second take returned the datagram again")
	}
	sendTo(t, peer, []byte("second"), addrOf(c))
	if n, err := w.Wait(); n != 6 || err != nil {
		t.Fatalf("wait: %d, %v", n, err)
	}
	bp, from, ok := w.TakeBuf()
	if !ok || string(*bp) != "second" || from != addrOf(peer) {
		t.Fatalf("take buf: %v %q from %s", ok, *bp, from)
	}
	PutBuf(bp)
}
