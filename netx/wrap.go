package netx

import "net"

// Observed is a conn wrapper whose Read and Write only observe the bytes
// (counting them, or guarding the flow) and whose Close closes the inner conn.
// A relay may move bytes on NetConn() directly — keeping Linux splice between
// two plain TCP sockets — and then reports what it moved with ObserveRead and
// ObserveWrite, as if the bytes had passed through the wrapper.
type Observed interface {
	net.Conn
	NetConn() net.Conn
	ObserveRead(n int64)
	ObserveWrite(n int64)
}

// Unwrap follows Observed wrappers down to the innermost conn and returns it
// with the wrappers passed, outermost first.
func Unwrap(c net.Conn) (net.Conn, []Observed) {
	var layers []Observed
	for {
		o, ok := c.(Observed)
		if !ok {
			return c, layers
		}
		layers = append(layers, o)
		c = o.NetConn()
	}
}
