package track

import (
	"errors"
	"net"
	"sync/atomic"

	"switchyard/netx"
	"switchyard/relay"
)

// Conn is a tracked TCP flow. Write counts Up (toward the destination), Read
// counts Down. It only observes bytes, so a relay may move them on NetConn
// directly and report them with ObserveWrite and ObserveRead. A flow of a
// session counts toward the session's wire bytes and its user's totals, and
// is paced at its user's rates: Read and Write pace themselves, a relay
// beneath the wrapper paces with Step and Pace.
type Conn struct {
	net.Conn
	m meter

	onEnd func(relay.End) // set by OnEnd; nil: nobody asked
	ended atomic.Bool     // FlowEnded ran
}

var (
	_ netx.Paced        = (*Conn)(nil)
	_ relay.EndObserver = (*Conn)(nil)
)

// ConnOption sets up a tracked conn as it is registered.
type ConnOption func(*Conn)

// OnEnd hands f how the flow ended, as the relay that carried it
// classified it (relay.End): once, when that relay returns, with both of
// its conns closed. A flow closed without a relay (its setup failed after
// the dial) reports nothing.
func OnEnd(f func(relay.End)) ConnOption { return func(c *Conn) { c.onEnd = f } }

// Conn registers a TCP flow, filed under meta.Session when that session is
// live, and returns c wrapped. Closing the wrapper unregisters the flow and
// closes c.
func (t *Tracker) Conn(meta Meta, c net.Conn, opts ...ConnOption) *Conn {
	tc := &Conn{Conn: c}
	for _, o := range opts {
		o(tc)
	}
	tc.m.meta = meta
	tc.m.inner = c
	t.add(&tc.m, false)
	return tc
}

// FlowEnded is told by the relay how the flow ended (relay.EndObserver) and
// hands it to the OnEnd hook, the first time only.
func (c *Conn) FlowEnded(e relay.End) {
	if c.ended.CompareAndSwap(false, true) && c.onEnd != nil {
		c.onEnd(e)
	}
}

// ID is the flow's id in the tracker.
func (c *Conn) ID() uint64 { return c.m.id }

// Read reads at most one pacing step and, when the user is paced, returns
// once the rate has paid for what it read.
func (c *Conn) Read(p []byte) (int, error) {
	if s := c.m.step(true); s > 0 && int64(len(p)) > s {
		p = p[:s]
	}
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.m.addDown(int64(n))
		if perr := c.m.paceDown(int64(n)); err == nil {
			err = perr
		}
	}
	return n, c.m.err(err)
}

// Write writes p and, when the user is paced, returns once the rate has
// paid for it.
func (c *Conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.m.addUp(int64(n))
		if perr := c.m.paceUp(int64(n)); err == nil {
			err = perr
		}
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
func (c *Conn) ObserveRead(n int64) { c.m.addDown(n) }

// ObserveWrite counts n bytes written beneath the wrapper as Up.
func (c *Conn) ObserveWrite(n int64) { c.m.addUp(n) }

// Step is how many bytes a relay beneath the wrapper should move at once in
// a direction (reads: Down) under the user's rate; 0 when unpaced.
func (c *Conn) Step(read bool) int64 { return c.m.step(read) }

// Pace waits out the pause n bytes a relay moved beneath the wrapper cost
// under the user's rate. It returns at once for an unpaced flow, and with
// net.ErrClosed or ErrKilled as soon as the flow ends.
func (c *Conn) Pace(read bool, n int64) error {
	if read {
		return c.m.paceDown(n)
	}
	return c.m.paceUp(n)
}
