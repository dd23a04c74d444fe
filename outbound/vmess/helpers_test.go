package vmess

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"switchyard/netx"
	"switchyard/outbound"
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

// server is a VMess server on loopback for one test; handle runs for each
// flow once its request header is open.
type server struct {
	ln net.Listener
	wg sync.WaitGroup
}

func newServer(t *testing.T, handle func(*session)) *server {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				req, err := vmesstest.ReadRequest(r, testUUID)
				if err != nil {
					t.Errorf("server: %v", err)
					return
				}
				handle(&session{conn: c, r: r, req: req, in: req.RequestBody(), out: req.ResponseBody()})
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
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
	o, err := New(spec.Outbound{
		Tag: "vmess", Type: "vmess", Server: addr, UUID: testUUIDText,
		Security: security, GlobalPadding: true, UDP: true,
	}, outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, 0)})
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
