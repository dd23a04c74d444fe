package wireguard

import (
	"context"
	"net"
	"net/netip"
	"testing"

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
