package netstack

import (
	"context"
	"errors"
	"net"
	"net/netip"

	"gvisor.dev/gvisor/pkg/tcpip"
	"gvisor.dev/gvisor/pkg/tcpip/adapters/gonet"
	"gvisor.dev/gvisor/pkg/tcpip/network/ipv6"
	"gvisor.dev/gvisor/pkg/tcpip/transport/udp"
	"gvisor.dev/gvisor/pkg/waiter"
)

// DialTCP connects to a through the stack's interface; it returns once the
// handshake is done, or fails when ctx ends first.
func (st *Stack) DialTCP(ctx context.Context, a netip.AddrPort) (*gonet.TCPConn, error) {
	to := tcpip.FullAddress{NIC: NIC, Addr: tcpip.AddrFromSlice(a.Addr().AsSlice()), Port: a.Port()}
	return gonet.DialContextTCP(ctx, st.s, to, ProtocolOf(a.Addr()))
}

// UDPEndpoint is a UDP endpoint of the stack: read and written through the
// conn over it, and also at hand with its waiter queue, so that a caller
// can wait for a datagram without reading it.
type UDPEndpoint struct {
	*gonet.UDPConn
	EP tcpip.Endpoint
	WQ *waiter.Queue
}

// ListenUDP binds a UDP endpoint to port on every address of both
// families: an IPv6 endpoint bound to no address, which carries IPv4 too
// (it is not IPv6-only). It is what gonet.DialUDP makes, its endpoint and
// queue kept.
func (st *Stack) ListenUDP(port uint16) (*UDPEndpoint, error) {
	wq := new(waiter.Queue)
	ep, terr := st.s.NewEndpoint(udp.ProtocolNumber, ipv6.ProtocolNumber, wq)
	if terr != nil {
		return nil, errors.New(terr.String())
	}
	if terr := ep.Bind(tcpip.FullAddress{NIC: NIC, Port: port}); terr != nil {
		ep.Close()
		return nil, &net.OpError{Op: "bind", Net: "udp", Addr: &net.UDPAddr{Port: int(port)}, Err: errors.New(terr.String())}
	}
	return &UDPEndpoint{UDPConn: gonet.NewUDPConn(wq, ep), EP: ep, WQ: wq}, nil
}
