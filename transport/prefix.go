package transport

import (
	"bufio"
	"errors"
	"net"
)

// withBuffered returns c, or c behind the bytes br read past the response
// head when there are any.
func withBuffered(c net.Conn, br *bufio.Reader) net.Conn {
	n := br.Buffered()
	if n == 0 {
		return c
	}
	pre, _ := br.Peek(n)
	return &prefixConn{Conn: c, pre: append([]byte(nil), pre...)}
}

// prefixConn serves bytes already read from the connection before reading
// on.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(p, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes the connection under it.
func (c *prefixConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.New("transport: the connection cannot half-close")
}
