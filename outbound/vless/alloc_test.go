package vless

import (
	"net"
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/protocol/mux"
)

// muxEcho answers each XUDP frame with a Keep frame from the same peer and
// the same payload, reusing its buffers.
func muxEcho(t *testing.T) net.Conn {
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
		c.Write([]byte{0, 0}) // the response header
		var p mux.Parser
		in := make([]byte, 0, 1<<17)
		out := make([]byte, 0, 1<<17)
		chunk := make([]byte, 32<<10)
		for {
			n, err := c.Read(chunk)
			if err != nil {
				return
			}
			in = append(in, chunk[:n]...)
			out = out[:0]
			for {
				fl, err := mux.FrameLen(in)
				if err != nil || fl > len(in) {
					break
				}
				f, err := p.Parse(in[:fl])
				if err != nil {
					return
				}
				f.Status, f.GlobalID = mux.StatusKeep, [8]byte{}
				out, _ = mux.AppendFrame(out, &f)
				in = in[:copy(in, in[fl:])]
			}
			if _, err := c.Write(out); err != nil {
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

// Once a link is open, a packet sent and a packet received cost no
// allocation, on both kinds of link.
func TestPacketsDoNotAllocate(t *testing.T) {
	peers := []netx.Addr{{IP: netip.MustParseAddr("192.0.2.9"), Port: 53}, netx.DomainAddr("dns.test", 53)}
	payload := make([]byte, 1200)
	buf := make([]byte, 65536)
	check := func(name string, l netx.PacketLink, attributed func(netx.Addr) netx.Addr) {
		roundTrip := func() {
			for _, peer := range peers {
				if err := l.WritePacket(payload, peer); err != nil {
					t.Fatal(err)
				}
				if n, from, err := l.ReadPacket(buf); err != nil || n != len(payload) || from != attributed(peer) {
					t.Fatalf("%s: %d from %v: %v", name, n, from, err)
				}
			}
		}
		roundTrip()
		if allocs := testing.AllocsPerRun(200, roundTrip); allocs != 0 {
			t.Fatalf("%s: %v allocations per round trip", name, allocs)
		}
	}
	check("xudp", newXUDPLink(muxEcho(t), peers[0], [8]byte{1}), func(a netx.Addr) netx.Addr { return a })

	// A single-target link over an echo of its own packets.
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
		c.Write([]byte{0, 0})
		b := make([]byte, 32<<10)
		for {
			n, err := c.Read(b)
			if err != nil {
				return
			}
			c.Write(b[:n])
		}
	}()
	c, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close(); <-done }()
	check("single target", newPacketLink(c, peers[0]), func(netx.Addr) netx.Addr { return peers[0] })
}
