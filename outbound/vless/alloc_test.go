package vless

import (
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
)

// Once a single-target link is open, a packet sent and a packet received
// cost no allocation.
func TestPacketsDoNotAllocate(t *testing.T) {
	target := netx.Addr{IP: netip.MustParseAddr("192.0.2.9"), Port: 53}
	l := newPacketLink(proxytest.EchoConn(t, []byte{0, 0}), target) // after the response header, an echo of its own packets
	proxytest.PacketsAllocateNothing(t, l, []netx.Addr{target, netx.DomainAddr("dns.test", 53)}, func(netx.Addr) netx.Addr { return target })
}
