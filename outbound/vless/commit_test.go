package vless

import (
	"context"
	"net"
	"testing"

	"switchyard/netx"
)

type committing struct {
	net.Conn
	commits int
}

func (c *committing) Commit(context.Context) { c.commits++ }

// A commit of a VLESS packet link, plain or XUDP, reaches the transport's
// stream under the VLESS framing.
func TestCommitReachesTheTransport(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &committing{Conn: a}
	netx.Commit(context.Background(), newPacketLink(c, netx.DomainAddr("a.test", 53)))
	if c.commits != 1 {
		t.Fatalf("%d commits reached the transport", c.commits)
	}
}
