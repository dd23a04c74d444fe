package http

import (
	"errors"
	"net"
)

// prefixConn is a proxy connection whose first bytes behind the response
// head were already read: Read returns them first.
type prefixConn struct {
	net.Conn
	rest []byte // used by the reader alone
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.rest) > 0 {
		n := copy(p, c.rest)
		c.rest = c.rest[n:]
		if len(c.rest) == 0 {
			c.rest = nil
		}
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the tunnel when the connection under it can.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("http: the proxy connection cannot half-close")
}
