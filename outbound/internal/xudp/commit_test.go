package xudp

import (
	"context"
	"net"
	"testing"

	"switchyard/netx"
)

// committing is a transport stream holding a speculative dial's work.
type committing struct {
	net.Conn
	commits int
}

func (c *committing) Commit(context.Context) { c.commits++ }

// A commit of an XUDP link (and so of the proxyconn link under it)
// reaches the transport's stream: the winner of a cold preparation over
// VLESS or VMess on gRPC publishes its HTTP/2 connection.
func TestCommitReachesTheTransport(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &committing{Conn: a}
	l := NewLink(c, netx.DomainAddr("a.test", 1), [8]byte{7}, 2048, 64)
	netx.Commit(context.Background(), l)
	if c.commits != 1 {
		t.Fatalf("%d commits reached the transport", c.commits)
	}
}
