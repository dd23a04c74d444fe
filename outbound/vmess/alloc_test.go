package vmess

import (
	"bytes"
	"crypto/rand"
	"net"
	"testing"
	"time"

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

func TestPacketsAllocateNothing(t *testing.T) {
	for _, sec := range []protocol.Security{protocol.SecurityAES128GCM, protocol.SecurityChacha20Poly1305, protocol.SecurityNone, protocol.SecurityZero} {
		s, req := allocSession(t, sec, protocol.CommandUDP)
		const runs = 50
		payload := make([]byte, 1400)
		body := req.ResponseBody()
		wire := req.AppendResponseHeader(nil, req.Check)
		for range runs + 2 {
			wire = body.AppendChunk(wire, payload)
		}
		l := newPacketLink(discardConn{&bytesConn{script: [][]byte{wire}}}, s, echoDst)
		buf := make([]byte, 2048)
		if n := testing.AllocsPerRun(runs, func() {
			if err := l.WritePacket(payload, echoDst); err != nil {
				t.Fatal(err)
			}
			if _, _, err := l.ReadPacket(buf); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%v: %v allocations per datagram each way", sec, n)
		}
	}
}
