package netx

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"
	"time"
)

// udpEcho answers every datagram with its copy, from the same socket.
func udpEcho(t *testing.T, network, addr string) netip.AddrPort {
	t.Helper()
	c, err := net.ListenPacket(network, addr)
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 70000)
		for {
			n, from, err := c.ReadFrom(b)
			if err != nil {
				return
			}
			c.WriteTo(b[:n], from)
		}
	}()
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}

// A link whose datagrams go out of one family is read on its reader's own
// goroutine: it starts none, and WaitPacket tells the size of the next
// datagram without taking it.
func TestDualUDPOneFamilyStartsNoGoroutine(t *testing.T) {
	echo := udpEcho(t, "udp4", "127.0.0.1:0")
	before := runtime.NumGoroutine()
	u, err := NewDialer(SocketPolicy{}, 0).BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	big := make([]byte, 30000)
	big[29999] = 'z'
	if err := u.WriteTo(big, echo); err != nil {
		t.Fatal(err)
	}
	if n, err := u.WaitPacket(); err != nil || n != len(big) {
		t.Fatalf("WaitPacket = %d, %v; want %d", n, err, len(big))
	}
	if n := runtime.NumGoroutine(); n > before { // an earlier test's goroutine may end meanwhile
		t.Fatalf("%d goroutines after a round trip on one family, %d before", n, before)
	}
	p := make([]byte, 40000)
	n, from, err := u.ReadFrom(p)
	if err != nil || n != len(big) || p[n-1] != 'z' || from != echo {
		t.Fatalf("ReadFrom = %d from %v, %v", n, from, err)
	}
}

// A reader blocked on the one family in use is woken when the other comes
// into use, and from then on reads both.
func TestDualUDPSecondFamilyWakesTheReader(t *testing.T) {
	echo4 := udpEcho(t, "udp4", "127.0.0.1:0")
	echo6 := udpEcho(t, "udp6", "[::1]:0")
	u, err := NewDialer(SocketPolicy{}, 0).BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u.Socket(V6) == nil {
		u.Close()
		t.Skip("no IPv6 socket")
	}
	defer u.Close()
	if err := u.WriteTo([]byte("four"), echo4); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 4)
	go func() {
		p := make([]byte, 64)
		for {
			if _, err := u.WaitPacket(); err != nil {
				return
			}
			n, _, err := u.ReadFrom(p)
			if err != nil {
				return
			}
			got <- string(p[:n])
		}
	}()
	if s := recv(t, got); s != "four" {
		t.Fatalf("got %q", s)
	}
	// The reader is now blocked on the IPv4 socket.
	if err := u.WriteTo([]byte("six"), echo6); err != nil {
		t.Fatal(err)
	}
	if s := recv(t, got); s != "six" {
		t.Fatalf("got %q, want the IPv6 reply", s)
	}
	if err := u.WriteTo([]byte("four again"), echo4); err != nil {
		t.Fatal(err)
	}
	if s := recv(t, got); s != "four again" {
		t.Fatalf("got %q", s)
	}
}

// A reader waiting before any datagram went out is woken by the first.
func TestDualUDPReaderWaitsForTheFirstSend(t *testing.T) {
	echo := udpEcho(t, "udp4", "127.0.0.1:0")
	u, err := NewDialer(SocketPolicy{}, 0).BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	got := make(chan string, 1)
	go func() {
		p := make([]byte, 64)
		n, _, err := u.ReadFrom(p)
		if err == nil {
			got <- string(p[:n])
		}
	}()
	time.Sleep(20 * time.Millisecond)
	if err := u.WriteTo([]byte("late"), echo); err != nil {
		t.Fatal(err)
	}
	if s := recv(t, got); s != "late" {
		t.Fatalf("got %q", s)
	}
}

func recv(t *testing.T, c <-chan string) string {
	t.Helper()
	select {
	case s := <-c:
		return s
	case <-time.After(5 * time.Second):
		t.Fatal("no datagram read")
		return ""
	}
}
