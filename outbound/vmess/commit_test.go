package vmess

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

// A commit of a VMess packet link, and of the Mux.Cool stream an XUDP
// link runs on, reaches the transport's stream under the VMess chunks.
func TestCommitReachesTheTransport(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	c := &committing{Conn: a}
	netx.Commit(context.Background(), &packetLink{conn: c})
	netx.Commit(context.Background(), &streamConn{Conn: c})
	if c.commits != 2 {
		t.Fatalf("%d commits of 2 reached the transport", c.commits)
	}
}
