package vmess

import (
	"testing"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	"switchyard/outbound/internal/xudp"
	protocol "switchyard/protocol/vmess"
)

// bodyReader reads a session's request body as a stream, across its chunks.
type bodyReader struct {
	s    *session
	rest []byte
}

func (b *bodyReader) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		chunk, err := b.s.in.ReadChunk(b.s.r)
		if err != nil {
			return 0, err
		}
		b.rest = chunk
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// With XUDP a link is a VMess Mux stream (naming no destination, as Xray's
// client sends it for v1.mux.cool) whose packets each name their own peer,
// for every security; the association's global ID comes from its source.
func TestXUDPPacketsNameTheirPeers(t *testing.T) {
	for _, sec := range securities {
		t.Run(sec, func(t *testing.T) {
			gids := make(chan [8]byte, 2)
			addr := newServer(t, func(s *session) {
				if s.req.Command != byte(protocol.CommandMux) || s.req.Dst != (netx.Addr{}) {
					t.Errorf("request for command %d to %v, want Mux naming nothing", s.req.Command, s.req.Dst)
					return
				}
				if s.header(s.req.Check) == nil {
					proxytest.XUDPEcho(t, &bodyReader{s: s}, s.chunk, gids)
				}
			})
			o := newOutboundEncoding(t, addr, sec, "xudp")
			proxytest.CheckXUDP(t, o, xudp.MaxPacket, gids, o.xudp.For)
		})
	}
}
