package trojan

import (
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
)

// A packet sent and a packet received cost no allocation once the link is
// open (packets are symmetric, so an echo answers each one from its peer).
func TestPacketsDoNotAllocate(t *testing.T) {
	peers := []netx.Addr{{IP: netip.MustParseAddr("192.0.2.9"), Port: 53}, netx.DomainAddr("dns.test", 53)}
	l := newPacketLink(proxytest.EchoConn(t, nil))
	proxytest.PacketsAllocateNothing(t, l, peers, func(a netx.Addr) netx.Addr { return a })
}
