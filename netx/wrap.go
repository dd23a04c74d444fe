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

// Passthrough is a protocol conn that, once its preamble is done in a
// direction (its header written, or the answer read), moves that
// direction's bytes unchanged on the conn under it. Through returns that
// conn for reads (read set) or writes from then on, and nil before. It may
// be called from any goroutine.
type Passthrough interface {
	net.Conn
	Through(read bool) net.Conn
}

// Unwrap follows Observed wrappers, and Passthrough conns done with their
// preamble for reads (read set) or writes, down to the innermost conn and
// returns it with the Observed wrappers passed, outermost first.
func Unwrap(c net.Conn, read bool) (net.Conn, []Observed) {
	var layers []Observed
	for {
		switch o := c.(type) {
		case Observed:
			layers = append(layers, o)
			c = o.NetConn()
		case Passthrough:
			inner := o.Through(read)
			if inner == nil {
				return c, layers
			}
			c = inner
		default:
			return c, layers
		}
	}
}

// Settling reports whether c, followed as Unwrap does, stops at a
// Passthrough conn not yet done with its preamble for reads (read set) or
// writes: Unwrap may reach further later.
func Settling(c net.Conn, read bool) bool {
	for {
		switch o := c.(type) {
		case Observed:
			c = o.NetConn()
		case Passthrough:
			if c = o.Through(read); c == nil {
				return true
			}
		default:
			return false
		}
	}
}
