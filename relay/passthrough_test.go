package relay_test

import (
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/relay"
)

// preamble is a protocol conn like VLESS's: its first Read consumes a
// 4-byte answer from the server, after which bytes pass unchanged.
type preamble struct {
	*net.TCPConn
	read bool // the answer was read; the reader's alone
	done atomic.Bool
}

var _ netx.Passthrough = (*preamble)(nil)

func (c *preamble) Read(p []byte) (int, error) {
	if !c.read {
		var h [4]byte
		if _, err := io.ReadFull(c.TCPConn, h[:]); err != nil {
			return 0, err
		}
		if string(h[:]) != "HDR!" {
			return 0, io.ErrUnexpectedEOF
		}
		c.read = true
		c.done.Store(true)
	}
	return c.TCPConn.Read(p)
}

func (c *preamble) Through(read bool) net.Conn {
	if !read || c.done.Load() {
		return c.TCPConn
	}
	return nil
}

// Writes to a Passthrough upstream splice from the start; reads from it are
// copied until its preamble is done, then splice too. The wrapper above it
// hears every byte.
func TestSpliceOnceAPassthroughConnIsThrough(t *testing.T) {
	client, inbound := tcpPair(t)
	upstream, server := tcpPair(t)
	obs := &counting{Conn: &preamble{TCPConn: upstream}}
	done := relayed(inbound, obs, time.Minute)

	// The client speaks first, before the server's answer.
	first := pattern(1000, 5)
	client.Write(first)
	got := make([]byte, len(first))
	if _, err := io.ReadFull(server, got); err != nil {
		t.Fatal(err)
	}
	same(t, "the first request bytes", got, first)

	request, response := pattern(3<<20, 6), pattern(2<<20, 7)
	serverGot := readAll(server)
	clientGot := readAll(client)
	server.Write([]byte("HDR!"))
	server.Write(response)
	server.CloseWrite()
	same(t, "client received", wait(t, clientGot, "the response"), response)
	client.Write(request)
	client.CloseWrite()
	same(t, "upstream received", wait(t, serverGot, "the request"), request)

	res := wait(t, done, "the relay")
	if res.PathAToB != relay.PathSplice || res.PathBToA != relay.PathSplice {
		t.Fatalf("paths %v and %v, want splice both ways", res.PathAToB, res.PathBToA)
	}
	if res.AToB != 1000+3<<20 || res.BToA != 2<<20 {
		t.Fatalf("relayed %d and %d bytes", res.AToB, res.BToA)
	}
	if obs.written.Load() != 1000+3<<20 || obs.read.Load() != 2<<20 {
		t.Fatalf("observed %d written and %d read", obs.written.Load(), obs.read.Load())
	}
	if d := obs.direct.Load(); d >= 1<<20 {
		t.Fatalf("%d bytes went through the wrapper's Read or Write: the relay did not switch to splice", d)
	}
}
