package wireguard

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"gvisor.dev/gvisor/pkg/waiter"

	"switchyard/netx"
)

// Sending a datagram adds no allocation to what the userspace stack and the
// device spend on it: the destination (an IP, or a remembered name) is
// written into the link's own reusable address.
func TestWritePacketAddsNoAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	keys := newKeyPair(t)
	o := clientSpec(nil, keys)
	// 192.0.2.0/24 is outside the allowed IPs: the device drops what the
	// link sends there, so nothing answers and only the send is counted.
	o.AllowedIPs = []netip.Prefix{netip.MustParsePrefix("10.7.0.0/24")}
	c := newClient(t, o)
	c.dests.answers["drop.test"] = []netip.Addr{netip.MustParseAddr("192.0.2.1")}
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := make([]byte, 1200)
	raw := &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1).To4(), Port: 9}
	// The stack's own goroutines allocate now and then while a count runs:
	// the least of a few counts is what a send costs.
	least := func(fn func()) float64 {
		n := testing.AllocsPerRun(500, fn)
		for range 4 {
			n = min(n, testing.AllocsPerRun(500, fn))
		}
		return n
	}
	stack := least(func() { l.(*packetLink).c.WriteTo(p, raw) })
	for _, to := range []string{"192.0.2.1:9", "drop.test:9"} {
		dst := mustAddr(to)
		if got := least(func() { l.WritePacket(p, dst) }); got > stack {
			t.Errorf("WritePacket to %s: %.0f allocations, the stack alone %.0f", to, got, stack)
		}
	}
}

// A wait allocates nothing: the link's entry on the endpoint's waiter queue
// is registered once, and a datagram is peeked into no buffer.
func TestWaitPacketAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	_, c := pair(t, "", nil)
	l := dialLink(t, c)
	echo := mustAddr("10.7.0.1:9001")
	if w := waitReply(t, l, echo, []byte("first")); w.err != nil {
		t.Fatal(w.err)
	}
	// A datagram waiting: the wait returns at once, and leaves it.
	if n := testing.AllocsPerRun(100, func() { l.WaitPacket() }); n != 0 {
		t.Errorf("%v allocations per wait for a datagram already there", n)
	}
	p := make([]byte, 100)
	l.ReadPacket(p)
	// None waiting: the wait blocks until the reply comes. Sending and the
	// stack's own goroutines allocate: compare with the send, a wait that
	// polls the endpoint and the read, the least of a few counts.
	least := func(fn func()) float64 {
		n := testing.AllocsPerRun(20, fn)
		for range 2 {
			n = min(n, testing.AllocsPerRun(20, fn))
		}
		return n
	}
	payload := []byte("ping")
	polled := least(func() {
		l.WritePacket(payload, echo)
		for l.ep.Readiness(waiter.ReadableEvents) == 0 {
			runtime.Gosched()
		}
		l.c.ReadFrom(p)
	})
	waited := least(func() {
		l.WritePacket(payload, echo)
		l.WaitPacket()
		l.c.ReadFrom(p)
	})
	t.Logf("a round trip: %v allocations with WaitPacket, %v polling", waited, polled)
	if waited > polled {
		t.Errorf("a send, a wait and a read: %v allocations; with a wait that polls: %v", waited, polled)
	}
}
