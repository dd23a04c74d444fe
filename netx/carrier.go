package netx

import "net"

// CarrierSink takes the physical sockets a Dialer connects, for a runtime
// that samples its carriers (carrier-pressure hints read their TCP_INFO).
// AddCarrier is called once per socket, right after its connect, from the
// dialing goroutine; it must not block and must not close the socket.
type CarrierSink interface {
	AddCarrier(c *net.TCPConn)
}
