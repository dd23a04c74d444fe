package vmess

import (
	"bytes"
	"crypto/rand"
	"errors"
	"net"
	"testing"
	"time"

	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/proxytest"
	protocol "switchyard/protocol/vmess"
	"switchyard/protocol/vmess/vmesstest"
)

// discardConn accepts every write.
type discardConn struct{ net.Conn }

func (discardConn) Write(p []byte) (int, error) { return len(p), nil }

// allocSession is a flow's session and the server's view of it.
func allocSession(t testing.TB, sec protocol.Security, cmd protocol.Command) (*protocol.Session, *vmesstest.Request) {
	t.Helper()
	s, err := protocol.NewSession(protocol.Request{Command: cmd, Security: sec, GlobalPadding: true, Dst: echoDst}, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hdr, _ := s.AppendRequest(nil, protocol.NewID(testUUID), time.Now())
	req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
	if err != nil {
		t.Fatal(err)
	}
	return s, req
}

// Sealing and writing a stream, and reading and opening one, allocate
// nothing once the flow is open.
func TestStreamAllocatesNothingPerChunk(t *testing.T) {
	for _, sec := range []protocol.Security{protocol.SecurityAES128GCM, protocol.SecurityChacha20Poly1305, protocol.SecurityNone} {
		s, req := allocSession(t, sec, protocol.CommandTCP)
		const runs = 50
		payload := make([]byte, 32<<10)
		body := req.ResponseBody()
		wire := req.AppendResponseHeader(nil, req.Check)
		for range runs + 2 {
			wire = body.AppendChunk(wire, payload[:8000])
		}
		c := newStreamConn(&bytesConn{script: [][]byte{wire}}, s)
		c.Conn = discardConn{c.Conn}
		buf := make([]byte, 8000)
		c.Read(buf) // opens the response header
		if n := testing.AllocsPerRun(runs, func() {
			if _, err := c.Write(payload); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Read(buf); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%v: %v allocations per write and read", sec, n)
		}
	}
}

// Datagrams each way allocate nothing once the link is open: a small one,
// and one too large for the reader's small buffer, which takes a pooled one
// and gives it back. Under the race detector the pools drop some of what
// they are given, so the count is left to the run without it.
func TestPacketsAllocateNothing(t *testing.T) {
	if proxytest.RaceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	for _, sec := range []protocol.Security{protocol.SecurityAES128GCM, protocol.SecurityChacha20Poly1305, protocol.SecurityNone, protocol.SecurityZero} {
		s, req := allocSession(t, sec, protocol.CommandUDP)
		const runs = 50
		small, large := make([]byte, 1400), make([]byte, 8000)
		body := req.ResponseBody()
		wire := req.AppendResponseHeader(nil, req.Check)
		for range runs + 2 {
			wire = body.AppendChunk(wire, small)
			wire = body.AppendChunk(wire, large)
		}
		l := newPacketLink(discardConn{&bytesConn{script: [][]byte{wire}}}, s, echoDst)
		buf := make([]byte, 8192)
		if n := testing.AllocsPerRun(runs, func() {
			for _, p := range [][]byte{small, large} {
				if err := l.WritePacket(p, echoDst); err != nil {
					t.Fatal(err)
				}
				if n, _, err := l.ReadPacket(buf); err != nil || n != len(p) {
					t.Fatalf("read %d bytes, %v; want %d", n, err, len(p))
				}
			}
		}); n != 0 {
			t.Errorf("%v: %v allocations per pair of datagrams each way", sec, n)
		}
	}
}

// A datagram link's reader reads a chunk too large for its small buffer
// into a pooled one, and gives that back once the chunk is passed on, when
// the next read starts, and when reading ends.
func TestPacketReaderGivesItsBufferBack(t *testing.T) {
	s, req := allocSession(t, protocol.SecurityAES128GCM, protocol.CommandUDP)
	body := req.ResponseBody()
	large := body.AppendChunk(req.AppendResponseHeader(nil, req.Check), make([]byte, 8000))
	small := body.AppendChunk(nil, []byte("small"))
	l := newPacketLink(discardConn{&bytesConn{script: [][]byte{large, small}}}, s, echoDst)
	if n, err := l.WaitPacket(); err != nil || n != 8000 {
		t.Fatalf("WaitPacket: %d, %v", n, err)
	}
	if l.rd.pooled == nil || len(l.rd.buf) != bufSize {
		t.Fatalf("reading an 8,000-byte chunk in a %d-byte buffer, pooled: %v", len(l.rd.buf), l.rd.pooled != nil)
	}
	l.ReadPacket(make([]byte, 8000))
	if n, err := l.WaitPacket(); err != nil || n != len("small") {
		t.Fatalf("WaitPacket: %d, %v", n, err)
	}
	if l.rd.pooled != nil || len(l.rd.buf) != releasingStart {
		t.Fatalf("the next chunk read in a %d-byte buffer, pooled: %v", len(l.rd.buf), l.rd.pooled != nil)
	}
	// The upstream ends inside a large chunk.
	s, req = allocSession(t, protocol.SecurityAES128GCM, protocol.CommandUDP)
	large = req.ResponseBody().AppendChunk(req.AppendResponseHeader(nil, req.Check), make([]byte, 8000))
	l = newPacketLink(discardConn{&bytesConn{script: [][]byte{large[:5000]}}}, s, echoDst)
	if _, err := l.WaitPacket(); !errors.Is(err, proxyconn.ErrFrameClosed) {
		t.Fatalf("WaitPacket at the end inside a chunk: %v", err)
	}
	if l.rd.pooled != nil {
		t.Fatal("a reader that reads no more holds its pooled buffer")
	}
}
