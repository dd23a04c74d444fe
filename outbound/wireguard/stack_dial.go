package wireguard

import (
	"context"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
)

// dialTCP connects to a through the stack's interface; it returns once
// the handshake is done, or fails when ctx ends first.
func (d *stackDevice) dialTCP(ctx context.Context, a netip.AddrPort) (*gonet.TCPConn, error) {
	to := tcpip.FullAddress{NIC: stackNIC, Addr: tcpip.AddrFromSlice(a.Addr().AsSlice()), Port: a.Port()}
	return gonet.DialContextTCP(ctx, d.stack, to, protocolOf(a.Addr()))
}

// listenUDP binds a UDP endpoint to port on every address of both
// families: an IPv6 endpoint bound to no address, which carries IPv4 too
// (it is not IPv6-only).
func (d *stackDevice) listenUDP(port uint16) (*gonet.UDPConn, error) {
	return gonet.DialUDP(d.stack, &tcpip.FullAddress{NIC: stackNIC, Port: port}, nil, ipv6.ProtocolNumber)
}
