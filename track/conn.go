package track

import (
	"errors"
	"net"

	"switchyard/netx"
)

// Conn is a tracked TCP flow. Write counts Up (toward the destination), Read
// counts Down. It only observes bytes, so a relay may move them on NetConn
// directly and report them with ObserveWrite and ObserveRead.
type Conn struct {
	net.Conn
	m meter
}

var _ netx.Observed = (*Conn)(nil)

// Conn registers a TCP flow and returns c wrapped. Closing the wrapper
// unregisters the flow and closes c.
func (t *Tracker) Conn(meta Meta, c net.Conn) *Conn {
	tc := &Conn{Conn: c}
	tc.m.meta = meta
	tc.m.inner = c
	t.add(&tc.m)
	return tc
}

// ID is the flow's id in the tracker.
func (c *Conn) ID() uint64 { return c.m.id }

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.m.down.Add(int64(n))
	}
	return n, c.m.err(err)
}

func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.m.up.Add(int64(n))
	}
	return n, c.m.err(err)
}

// errNoHalfClose is returned by CloseWrite when the inner conn cannot
// half-close; the caller should close the whole conn instead.
var errNoHalfClose = errors.New("track: the connection cannot half-close")

// CloseWrite half-closes the inner conn when it can.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return c.m.err(cw.CloseWrite())
	}
	return errNoHalfClose
}

// Close unregisters the flow and closes the inner conn. It is idempotent.
func (c *Conn) Close() error { return c.m.close() }

// NetConn returns the inner conn.
func (c *Conn) NetConn() net.Conn { return c.Conn }

// ObserveRead counts n bytes read beneath the wrapper as Down.
func (c *Conn) ObserveRead(n int64) { c.m.down.Add(n) }

// ObserveWrite counts n bytes written beneath the wrapper as Up.
func (c *Conn) ObserveWrite(n int64) { c.m.up.Add(n) }
