package vmess

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"

	"switchyard/netx"
	protocol "switchyard/protocol/vmess"
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

// unsignalledConn's CloseWrite cannot tell the server (XHTTP's packet-up).
type unsignalledConn struct{ net.Conn }

func (unsignalledConn) CloseWrite() error { return netx.ErrEndUnsignalled }

// A chunked body's end chunk tells the server the upload ended, on a
// transport that cannot: CloseWrite is a half-close the peer learns of.
// A body without chunks ends only with the transport's half-close.
func TestTheEndChunkSignalsTheEnd(t *testing.T) {
	for _, c := range []struct {
		sec        protocol.Security
		unsignaled bool
	}{{protocol.SecurityAES128GCM, false}, {protocol.SecurityZero, true}} {
		a, b := net.Pipe()
		go io.Copy(io.Discard, b)
		s, err := protocol.NewSession(protocol.Request{Command: protocol.CommandTCP, Security: c.sec, Dst: netx.DomainAddr("example.com", 443)}, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		err = newStreamConn(unsignalledConn{a}, s).CloseWrite()
		if errors.Is(err, netx.ErrEndUnsignalled) != c.unsignaled || !c.unsignaled && err != nil {
			t.Errorf("security %v: CloseWrite = %v", c.sec, err)
		}
		a.Close()
		b.Close()
	}
}
