package connpool

import (
	"net"
	"syscall"
)

// probe is what a look into a pooled connection's socket found.
type probe uint8

const (
	probeOpen   probe = iota // open, nothing pending
	probeData                // open, bytes pending
	probeClosed              // FIN, RST, an error, or no way to look
)

// usable reports whether c, a connection nothing was written to or read
// from since its handshakes, can be handed to a flow: the peer has neither
// closed nor reset it. Bytes pending are allowed over TLS (a TLS 1.3
// server sends its session tickets after the handshake, and the TLS client
// reads them as such) and refused on a bare connection, where the server
// has no business speaking first: a flow would read them as the answer to
// its request. A connection whose socket cannot be reached is not usable.
func usable(c net.Conn) bool {
	raw, layered := c, false
	if l, ok := c.(interface{ NetConn() net.Conn }); ok {
		raw, layered = l.NetConn(), true
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	p := probeClosed
	if err := rc.Read(func(fd uintptr) bool { p = probeFD(fd); return true }); err != nil {
		return false
	}
	return p == probeOpen || p == probeData && layered
}
