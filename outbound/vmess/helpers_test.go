package vmess

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"testing"

	"go.uber.org/goleak"

	"switchyard/outbound/internal/proxytest"
	protocol "switchyard/protocol/vmess"
	"switchyard/protocol/vmess/vmesstest"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testUUIDText = "b831381d-6324-4d53-ad4f-8cda48b30811"

var testUUID, _ = protocol.ParseUUID(testUUIDText)

var securities = []string{"aes-128-gcm", "chacha20-poly1305", "none", "zero", "auto"}

// session is the server's side of one accepted flow.
type session struct {
	conn net.Conn
	r    *bufio.Reader
	req  *vmesstest.Request
	in   *vmesstest.Body
	out  *vmesstest.Body
}

func (s *session) header(check byte) error {
	_, err := s.conn.Write(s.req.AppendResponseHeader(nil, check))
	return err
}

func (s *session) chunk(p []byte) error {
	_, err := s.conn.Write(s.out.AppendChunk(nil, p))
	return err
}

// newServer runs a VMess server on loopback for one test and returns its
// address; handle runs for each flow once its request header is open.
func newServer(t *testing.T, handle func(*session)) string {
	t.Helper()
	return proxytest.Listen(t, func(c net.Conn) {
		r := bufio.NewReader(c)
		req, err := vmesstest.ReadRequest(r, testUUID)
		if err != nil {
			t.Errorf("server: %v", err)
			return
		}
		handle(&session{conn: c, r: r, req: req, in: req.RequestBody(), out: req.ResponseBody()})
	})
}

// echo answers every chunk with the same payload, and the end chunk with
// its own end chunk and a half-close. A UDP flow's replies are prefixed
// with "re:".
func echo(s *session) {
	if err := s.header(s.req.Check); err != nil {
		return
	}
	for {
		p, err := s.in.ReadChunk(s.r)
		if err == io.EOF {
			if s.req.Options&0x01 != 0 {
				s.chunk(nil)
			}
			s.conn.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, s.r)
			return
		}
		if err != nil {
			return
		}
		if s.req.Command == 2 {
			p = append([]byte("re:"), p...)
		}
		if s.chunk(p) != nil {
			return
		}
	}
}

func newOutbound(t testing.TB, addr, security string) *Outbound {
	t.Helper()
	return newOutboundEncoding(t, addr, security, "")
}

func newOutboundEncoding(t testing.TB, addr, security, packetEncoding string) *Outbound {
	t.Helper()
	o, err := New(spec.Outbound{
		Tag: "vmess", Type: "vmess", Server: addr, UUID: testUUIDText,
		Security: security, GlobalPadding: true, UDP: true, PacketEncoding: packetEncoding,
	}, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// bytesConn is a net.Conn whose reads come from a script of chunks, for
// driving the frame reader with bytes a real server would not send.
type bytesConn struct {
	net.Conn
	script [][]byte
}

func (c *bytesConn) Read(p []byte) (int, error) {
	for len(c.script) > 0 && len(c.script[0]) == 0 {
		c.script = c.script[1:]
	}
	if len(c.script) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.script[0])
	c.script[0] = c.script[0][n:]
	return n, nil
}

// responseHeaderFor is the true response header to the sealed request hdr.
func responseHeaderFor(t testing.TB, hdr []byte) []byte {
	t.Helper()
	req, err := vmesstest.ReadRequest(bytes.NewReader(hdr), testUUID)
	if err != nil {
		t.Fatal(err)
	}
	return req.AppendResponseHeader(nil, req.Check)
}
