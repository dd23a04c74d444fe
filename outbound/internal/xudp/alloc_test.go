package xudp

import (
	"net"
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/mux"
)

// muxEcho answers each XUDP frame with a Keep frame from the same peer and
// the same payload, reusing its buffers.
func muxEcho(c net.Conn) {
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
}

// Once a link is open, a packet sent and a packet received cost no
// allocation.
func TestPacketsDoNotAllocate(t *testing.T) {
	peers := []netx.Addr{{IP: netip.MustParseAddr("192.0.2.9"), Port: 53}, netx.DomainAddr("dns.test", 53)}
	l := NewLink(proxytest.Dial(t, muxEcho), peers[0], [8]byte{1}, bufSize, reserve)
	proxytest.PacketsAllocateNothing(t, l, peers, func(a netx.Addr) netx.Addr { return a })
}
