package vless

import (
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	codec "switchyard/protocol/vless"
)

// streamConn is a VLESS stream: the server's response header comes before
// its first byte and is read and checked by the first Read; the rest, both
// ways, is the flow's bytes (or a datagram link's frames) unchanged.
type streamConn struct {
	net.Conn

	// Reader side: the response header as far as it was read. Progress
	// survives a Read cut by a deadline.
	hdr  [2 + 255]byte
	have int
	done bool
	bad  error // the response header was refused; final

	through atomic.Bool // done, as seen from any goroutine
}

var _ netx.Passthrough = (*streamConn)(nil)

// Through returns the transport's conn for writes at once (the request
// header went out with the dial) and for reads once the response header has
// been read: from then on bytes pass unchanged, so a relay may splice them.
func (c *streamConn) Through(read bool) net.Conn {
	if !read || c.through.Load() {
		return c.Conn
	}
	return nil
}

// Read reads the response header first, then the flow's bytes.
func (c *streamConn) Read(p []byte) (int, error) {
	if !c.done {
		if err := c.response(); err != nil {
			return 0, err
		}
	}
	return c.Conn.Read(p)
}

func (c *streamConn) response() error {
	if c.bad != nil {
		return c.bad
	}
	for {
		n, err := codec.ResponseLen(c.hdr[:c.have])
		if err != nil {
			c.bad = err
			return err
		}
		if n <= c.have {
			c.done = true
			c.through.Store(true)
			return nil
		}
		m, err := c.Conn.Read(c.hdr[c.have:n])
		c.have += m
		switch {
		case err == io.EOF:
			c.bad = proxyconn.ErrHandshakeClosed
			return c.bad
		case err != nil && !errors.Is(err, os.ErrDeadlineExceeded):
			c.bad = err
			return err
		case err != nil:
			return err
		}
	}
}

// CloseWrite ends the flow's bytes toward the server (nothing is buffered
// here) and keeps the other direction open, when the transport can.
func (c *streamConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("vless: the transport cannot half-close")
}

// Carrier is the transport's stream under the VLESS framing
// (netx.Carrier). Not NetConn: the relay must not move bytes on it
// directly.
func (c *streamConn) Carrier() net.Conn { return c.Conn }
