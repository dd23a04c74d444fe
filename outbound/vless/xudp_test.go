package vless

import (
	"net"
	"testing"

	"switchyard/outbound/internal/proxytest"
	"switchyard/outbound/internal/xudp"
	codec "switchyard/protocol/vless"
)

// With XUDP a link is a VLESS Mux stream whose packets each name their own
// peer; the association's global ID comes from its source.
func TestXUDPPacketsNameTheirPeers(t *testing.T) {
	gids := make(chan [8]byte, 2)
	addr := proxytest.Listen(t, func(c net.Conn) {
		readRequest(t, c, codec.CmdMux)
		c.Write([]byte{0, 0}) // the response header
		proxytest.XUDPEcho(t, c, func(b []byte) error { _, err := c.Write(b); return err }, gids)
	})
	o := newVLESS(t, addr, "xudp")
	proxytest.CheckXUDP(t, o, xudp.MaxPacket, gids, o.xudp.For)
}
