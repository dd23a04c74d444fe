package wireguard

import (
	"context"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"

	"switchyard/internal/netstack"
)

// dialTCP connects to a through the stack's interface; it returns once
// the handshake is done, or fails when ctx ends first.
func (d *stackDevice) dialTCP(ctx context.Context, a netip.AddrPort) (*gonet.TCPConn, error) {
	return d.stack.DialTCP(ctx, a)
}

// udpEndpoint is a UDP endpoint of the stack (netstack.UDPEndpoint).
type udpEndpoint = netstack.UDPEndpoint

// listenUDP binds a UDP endpoint to port on every address of both
// families (netstack.Stack.ListenUDP).
func (d *stackDevice) listenUDP(port uint16) (*udpEndpoint, error) {
	return d.stack.ListenUDP(port)
}
