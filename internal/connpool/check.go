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

// verdict is what a look into a pooled connection found.
type verdict uint8

const (
	fine   verdict = iota // usable
	spoke                 // open, but the server sent bytes on a bare connection
	closed                // the server closed or reset it, or no way to look
)

// usable reports whether c, a connection nothing was written to or read
// from since its handshakes, can be handed to a flow: the peer has neither
// closed nor reset it. Bytes pending are allowed over TLS (a TLS 1.3
// server sends its session tickets after the handshake, and the TLS client
// reads them as such) and refused on a bare connection, where the server
// has no business speaking first: a flow would read them as the answer to
// its request. A connection whose socket cannot be reached is not usable.
func usable(c net.Conn) bool { return look(c) == fine }

// look is usable's finding, telling a close (what the idle bound learns
// from) from a server that spoke first.
func look(c net.Conn) verdict {
	raw, layered := c, false
	if l, ok := c.(interface{ NetConn() net.Conn }); ok {
		raw, layered = l.NetConn(), true
	}
	sc, ok := raw.(syscall.Conn)
	if !ok {
		return closed
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return closed
	}
	p := probeClosed
	if err := rc.Read(func(fd uintptr) bool { p = probeFD(fd); return true }); err != nil {
		return closed
	}
	switch {
	case p == probeOpen, p == probeData && layered:
		return fine
	case p == probeData:
		return spoke
	}
	return closed
}
