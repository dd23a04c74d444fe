package socks

import (
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

func TestConnectNamesTheDestination(t *testing.T) {
	for _, tc := range []struct{ name, user, pass, dst string }{
		{"no auth, domain", "", "", "example.com:443"},
		{"no auth, IPv4", "", "", "192.0.2.7:80"},
		{"no auth, IPv6", "", "", "[2001:db8::1]:53"},
		{"user and password", "alice", "s3cret", "example.com:443"},
		{"user with an empty password", "bob", "", "example.com:443"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{user: tc.user, pass: tc.pass, requests: make(chan socks5.Request, 1)}
			o := newOutbound(t, s.start(t), tc.user, tc.pass, nil)
			f := proxytest.TCPFlow(tc.dst)
			c, err := o.DialStream(proxytest.Ctx(t), f)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := <-s.requests
			if req.Cmd != socks5.CmdConnect || req.Dst != f.Dst {
				t.Fatalf("request %+v, want CONNECT %v", req, f.Dst)
			}
			proxytest.Echoes(t, c, []byte("hello through socks"))
		})
	}
}

// The returned stream is the server connection itself: a plain TCP one keeps
// its half-close, so the relay can forward an end of stream.
func TestConnectStreamHalfCloses(t *testing.T) {
	s := &server{after: func(c net.Conn, _ socks5.Request) {
		b, _ := io.ReadAll(c) // until the client's half-close
		c.Write(b)
	}}
	o := newOutbound(t, s.start(t), "", "", nil)
	c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:80"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T has no CloseWrite", c)
	}
	c.Write([]byte("request"))
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "request" {
		t.Fatalf("after half-close read %q, %v", got, err)
	}
}

// Bytes the server sends right behind its reply belong to the flow.
func TestConnectKeepsBytesAfterTheReply(t *testing.T) {
	addr := proxytest.Listen(t, func(c net.Conn) {
		socks5.ReadGreeting(c)
		c.Write([]byte{5, 0})
		socks5.ReadRequest(c)
		c.Write(append(socks5.AppendReply(nil, 0, netx.Addr{}), "220 ready\r\n"...))
		io.Copy(io.Discard, c)
	})
	o := newOutbound(t, addr, "", "", nil)
	c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("mail.example:25"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 11)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "220 ready\r\n" {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestConnectRejectedStatus(t *testing.T) {
	for code := byte(1); code <= 9; code++ {
		s := &server{status: code}
		o := newOutbound(t, s.start(t), "", "", nil)
		c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
		if err == nil {
			c.Close()
			t.Fatalf("status %d: dial succeeded", code)
		}
		want := "server rejects request: " + string('0'+rune(code)) + " (" + socks5.ReplyText(code) + ")"
		if err.Error() != want {
			t.Fatalf("status %d: error %q, want %q", code, err, want)
		}
		var rej *RejectedError
		if !errors.As(err, &rej) || rej.Status != code {
			t.Fatalf("status %d: not a *RejectedError: %v", code, err)
		}
		// The kind the SOCKS inbound answers with reply 0x05.
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("status %d: %v does not match ECONNREFUSED", code, err)
		}
	}
}

func TestConnectAuthFailures(t *testing.T) {
	t.Run("account rejected", func(t *testing.T) {
		s := &server{user: "alice", pass: "right"}
		o := newOutbound(t, s.start(t), "alice", "wrong", nil)
		_, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
		if !errors.Is(err, socks5.ErrAuthRejected) || !strings.Contains(err.Error(), "server rejects account") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("no acceptable method", func(t *testing.T) {
		s := &server{method: socks5.MethodNoAcceptable}
		o := newOutbound(t, s.start(t), "", "", nil)
		_, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
		if !errors.Is(err, socks5.ErrNoAcceptableMethod) || !strings.Contains(err.Error(), "auth method not supported") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a method not offered", func(t *testing.T) {
		s := &server{method: socks5.MethodUserPass}
		o := newOutbound(t, s.start(t), "", "", nil)
		_, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
		if err == nil || !strings.Contains(err.Error(), "server chose method 0x02, which was not offered") {
			t.Fatalf("error %v", err)
		}
	})
}

// A server that closes at any point of the handshake fails the dial with
// ErrHandshakeClosed; one that speaks another version fails it with the
// parser's error.
func TestConnectHandshakeBreaks(t *testing.T) {
	cases := []struct {
		name  string
		serve func(c net.Conn)
		want  string
	}{
		{"after the greeting", func(c net.Conn) { socks5.ReadGreeting(c) }, proxyconn.ErrHandshakeClosed.Error()},
		{"inside the method choice", func(c net.Conn) { socks5.ReadGreeting(c); c.Write([]byte{5}) }, proxyconn.ErrHandshakeClosed.Error()},
		{"after the request", func(c net.Conn) {
			socks5.ReadGreeting(c)
			c.Write([]byte{5, 0})
			socks5.ReadRequest(c)
		}, proxyconn.ErrHandshakeClosed.Error()},
		{"inside the reply", func(c net.Conn) {
			socks5.ReadGreeting(c)
			c.Write([]byte{5, 0})
			socks5.ReadRequest(c)
			c.Write([]byte{5, 0, 0, 1, 127, 0})
		}, proxyconn.ErrHandshakeClosed.Error()},
		{"wrong version", func(c net.Conn) { socks5.ReadGreeting(c); c.Write([]byte{4, 0}) }, "unexpected server version 4"},
		{"unknown address type", func(c net.Conn) {
			socks5.ReadGreeting(c)
			c.Write([]byte{5, 0})
			socks5.ReadRequest(c)
			c.Write([]byte{5, 0, 0, 9, 0, 0})
		}, "address type not supported"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutbound(t, proxytest.Listen(t, tc.serve), "", "", nil)
			c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
			if tc.want == proxyconn.ErrHandshakeClosed.Error() && (!errors.Is(err, proxyconn.ErrHandshakeClosed) || !errors.Is(err, io.ErrUnexpectedEOF)) {
				t.Fatalf("error %v is not proxyconn.ErrHandshakeClosed", err)
			}
		})
	}
}

func TestConnectRefusedUpstream(t *testing.T) {
	o := newOutbound(t, proxytest.RefusedAddr(t), "", "", nil)
	_, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("error %v", err)
	}
}

// A server that never answers holds the dial only until the context ends;
// the context's deadline is cleared once the handshake is done.
func TestConnectHonoursTheContext(t *testing.T) {
	silent := proxytest.Listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	s := &server{}
	proxytest.DialHonoursTheContext(t, newOutbound(t, silent, "", "", nil), newOutbound(t, s.start(t), "", "", nil))
}

// The CONNECT dial is one stream socket under the socket policy; a hook
// that refuses it fails the dial.
func TestConnectUnderTheSocketPolicy(t *testing.T) {
	s := &server{}
	addr := s.start(t)
	h := &proxytest.Hook{}
	o := newOutbound(t, addr, "", "", h)
	c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got := h.Networks(); !slices.Equal(got, []string{"tcp4"}) {
		t.Fatalf("hooked sockets %v, want [tcp4]", got)
	}

	h = &proxytest.Hook{Refuse: map[string]bool{"tcp4": true}}
	o = newOutbound(t, addr, "", "", h)
	if _, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443")); !errors.Is(err, proxytest.ErrRefusedByHook) {
		t.Fatalf("refused socket: %v", err)
	}
}

func TestNew(t *testing.T) {
	deps := proxytest.Deps(nil)
	o, err := New(spec.Outbound{Type: "socks", Server: "proxy.example:1080"}, deps)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.ProbeTarget(); got != netx.DomainAddr("proxy.example", 1080) {
		t.Fatalf("probe target %v", got)
	}
	for _, bad := range []spec.Outbound{
		{Type: "socks", Server: "no-port"},
		{Type: "socks", Server: "p:1080", Username: strings.Repeat("u", 256)},
		{Type: "socks", Server: "p:1080", Username: "u", Password: strings.Repeat("p", 256)},
		{Type: "socks", Server: "p:1080", Password: "orphan"},
		{Type: "socks", Server: "p:1080", AddressFamily: "sideways"},
	} {
		if _, err := New(bad, deps); err == nil {
			t.Errorf("%+v built", bad)
		}
	}
	if _, err := New(spec.Outbound{Type: "socks", Server: "p:1080"}, outbound.Deps{}); err == nil {
		t.Error("built without a dialer")
	}
}
