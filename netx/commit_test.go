package netx

import (
	"context"
	"net"
	"testing"
)

type commitCounter struct {
	net.Conn
	n int
}

func (c *commitCounter) Commit(context.Context) { c.n++ }

type carrier struct {
	net.Conn
	inner net.Conn
}

func (c carrier) Carrier() net.Conn { return c.inner }

type observed struct {
	net.Conn
	inner net.Conn
}

func (o observed) NetConn() net.Conn { return o.inner }

// Commit reaches a Committer through Carriers (a protocol's link over its
// transport's stream), and never through NetConn, which says only that a
// relay may move bytes on the inner conn.
func TestCommitLooksThroughCarriers(t *testing.T) {
	c := &commitCounter{}
	Commit(context.Background(), carrier{inner: carrier{inner: c}})
	if c.n != 1 {
		t.Fatalf("through two carriers: %d commits", c.n)
	}
	Commit(context.Background(), observed{inner: c})
	if c.n != 1 {
		t.Fatal("Commit looked through NetConn")
	}
	Commit(context.Background(), carrier{})
	Commit(context.Background(), 42)
}
