package netx

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"
)

// idleReader reads u as a batching reader does: it counts the datagrams it
// took since the last idle call, and each idle call records that count.
type idleReader struct {
	u     *DualUDP
	taken int
	runs  chan int // the datagrams taken before each idle call with some
	got   chan string
}

func newIdleReader(u *DualUDP) *idleReader {
	r := &idleReader{u: u, runs: make(chan int, 64), got: make(chan string, 64)}
	if !u.NotifyIdle(func() {
		if r.taken > 0 {
			r.runs <- r.taken
			r.taken = 0
		}
	}) {
		panic("DualUDP always notifies")
	}
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
			r.taken++
			r.got <- string(p[:n])
		}
	}()
	return r
}

func (r *idleReader) run(t *testing.T) int {
	t.Helper()
	select {
	case n := <-r.runs:
		return n
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPacket never called idle")
		return 0
	}
}

// burst has peer send n one-byte datagrams to to.
func burst(t *testing.T, peer *net.UDPConn, to netip.AddrPort, n int) {
	t.Helper()
	for i := range n {
		sendTo(t, peer, []byte{byte('a' + i)}, to)
	}
}

// WaitPacket calls idle when it finds no datagram waiting, before it
// blocks: not between datagrams that were waiting already, so a batching
// reader hands on a run of them at once, and again after the next one.
func TestDualUDPNotifiesIdle(t *testing.T) {
	peer := listenUDP(t, "udp4", "127.0.0.1:0")
	u, err := NewDialer(SocketPolicy{}, 0).BindDual(context.Background(), []Family{V4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if err := u.WriteTo([]byte("hello"), addrOf(peer)); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 64)
	_, from, err := peer.ReadFromUDPAddrPort(p)
	if err != nil {
		t.Fatal(err)
	}
	// Five datagrams wait before the reader starts.
	burst(t, peer, from, 5)
	time.Sleep(50 * time.Millisecond)
	r := newIdleReader(u)
	if n := r.run(t); n != 5 {
		t.Fatalf("idle after %d datagrams, want 5 (the run that was waiting)", n)
	}
	for range 5 {
		<-r.got
	}
	sendTo(t, peer, []byte("one"), from)
	if n := r.run(t); n != 1 {
		t.Fatalf("idle after %d datagrams, want 1", n)
	}
}

// Once both families are in use their readers hand datagrams over, and
// WaitPacket calls idle when none is handed.
func TestDualUDPNotifiesIdleWithBothFamilies(t *testing.T) {
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
	r := newIdleReader(u)
	for _, m := range []struct {
		to netip.AddrPort
		p  string
	}{{echo4, "four"}, {echo6, "six"}} {
		if err := u.WriteTo([]byte(m.p), m.to); err != nil {
			t.Fatal(err)
		}
		if s := recv(t, r.got); s != m.p {
			t.Fatalf("got %q, want %q", s, m.p)
		}
		if n := r.run(t); n != 1 {
			t.Fatalf("idle after %d datagrams, want 1", n)
		}
	}
}
