package relay_test

import (
	"net"
	"sync/atomic"

	"switchyard/netx"
)

// counting is a netx.Observed wrapper that counts what the relay reports and,
// separately, what passes through its own Read and Write.
type counting struct {
	net.Conn
	read, written, direct atomic.Int64
}

var _ netx.Observed = (*counting)(nil)

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	c.direct.Add(int64(n))
	return n, err
}

func (c *counting) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	c.direct.Add(int64(n))
	return n, err
}

func (c *counting) CloseWrite() error {
	return c.Conn.(interface{ CloseWrite() error }).CloseWrite()
}
func (c *counting) NetConn() net.Conn    { return c.Conn }
func (c *counting) ObserveRead(n int64)  { c.read.Add(n) }
func (c *counting) ObserveWrite(n int64) { c.written.Add(n) }
