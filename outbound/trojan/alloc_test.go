package trojan

import (
	"net"
	"net/netip"
	"testing"

	"switchyard/netx"
)

// echoPair returns a loopback TCP conn whose peer writes back every byte.
func echoPair(t *testing.T) net.Conn {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 32<<10)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); <-done })
	return c
}

// A packet sent and a packet received cost no allocation once the link is
// open (packets are symmetric, so an echo answers each one from its peer).
func TestPacketsDoNotAllocate(t *testing.T) {
	l := newPacketLink(echoPair(t))
	peers := []netx.Addr{{IP: netip.MustParseAddr("192.0.2.9"), Port: 53}, netx.DomainAddr("dns.test", 53)}
	payload := make([]byte, 1200)
	buf := make([]byte, 65536)
	roundTrip := func() {
		for _, peer := range peers {
			if err := l.WritePacket(payload, peer); err != nil {
				t.Fatal(err)
			}
			if n, from, err := l.ReadPacket(buf); err != nil || n != len(payload) || from != peer {
				t.Fatalf("%d from %v: %v", n, from, err)
			}
		}
	}
	roundTrip()
	if allocs := testing.AllocsPerRun(200, roundTrip); allocs != 0 {
		t.Fatalf("%v allocations per round trip", allocs)
	}
}
