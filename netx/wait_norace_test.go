//go:build !race

package netx

import (
	"net/netip"
	"sync/atomic"
	"testing"
)

// A wait for one sender allocates nothing, the strangers' datagrams it
// drops on the way included (on Linux; elsewhere peeking a sender
// allocates).
func TestDatagramWaiterFromAllocatesNothing(t *testing.T) {
	sock := listenUDP(t, "udp4", "127.0.0.1:0")
	relay := listenUDP(t, "udp4", "127.0.0.1:0")
	stranger := listenUDP(t, "udp4", "127.0.0.1:0")
	var dropped atomic.Int64
	w, err := NewDatagramWaiterFrom(sock, addrOf(relay), func(netip.AddrPort) { dropped.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	to := addrOf(sock)
	junk, p, buf := make([]byte, 500), make([]byte, 1200), make([]byte, 2048)
	round := func() {
		stranger.WriteToUDPAddrPort(junk, to)
		relay.WriteToUDPAddrPort(p, to)
		if n, err := w.Wait(); err != nil || n != len(p) {
			t.Fatalf("Wait = %d, %v", n, err)
		}
		if n, _, err := sock.ReadFromUDPAddrPort(buf); err != nil || n != len(p) {
			t.Fatalf("read %d, %v", n, err)
		}
	}
	round()
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Fatalf("%v allocations per wait", n)
	}
	// One round first, then AllocsPerRun's warm-up and its 100 runs.
	if dropped.Load() != 102 {
		t.Fatalf("%d datagrams dropped, want 102", dropped.Load())
	}
}

// A plain wait and its Take allocate nothing once the pool holds a buffer.
func TestDatagramWaiterAllocatesNothing(t *testing.T) {
	sock := listenUDP(t, "udp4", "127.0.0.1:0")
	peer := listenUDP(t, "udp4", "127.0.0.1:0")
	w, err := NewDatagramWaiter(sock)
	if err != nil {
		t.Fatal(err)
	}
	to := addrOf(sock)
	p, buf := make([]byte, 1200), make([]byte, 2048)
	round := func() {
		peer.WriteToUDPAddrPort(p, to)
		if n, err := w.Wait(); err != nil || n != len(p) {
			t.Fatalf("Wait = %d, %v", n, err)
		}
		if n, _, ok := w.Take(buf); !ok || n != len(p) {
			t.Fatalf("take %d, %v", n, ok)
		}
	}
	round()
	if n := testing.AllocsPerRun(100, round); n != 0 {
		t.Fatalf("%v allocations per wait", n)
	}
}
