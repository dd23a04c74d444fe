package socks

import (
	"io"
	"net"
	"testing"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

// server is a scriptable SOCKS5 server.
type server struct {
	user, pass string    // credentials it requires; "" = none
	method     byte      // the method it chooses; 0 = what the client offered
	status     byte      // the reply status
	bound      netx.Addr // the address the reply names
	// after runs once the reply is written (on success only); nil echoes.
	after func(c net.Conn, req socks5.Request)

	requests chan socks5.Request // every request read, when set
}

func (s *server) serve(t *testing.T, c net.Conn) {
	methods, err := socks5.ReadGreeting(c)
	if err != nil {
		return
	}
	if len(methods) != 1 {
		t.Errorf("greeting offers %d methods (% x), want exactly one", len(methods), methods)
		return
	}
	want := socks5.MethodNoAuth
	if s.user != "" {
		want = socks5.MethodUserPass
	}
	if methods[0] != want {
		t.Errorf("greeting offers %#02x, want %#02x", methods[0], want)
	}
	choice := s.method
	if choice == 0 {
		choice = methods[0]
	}
	c.Write(socks5.AppendMethodChoice(nil, choice))
	if choice == socks5.MethodNoAcceptable {
		return
	}
	if choice == socks5.MethodUserPass {
		u, p, err := socks5.ReadUserPass(c)
		if err != nil {
			return
		}
		ok := u == s.user && p == s.pass
		c.Write(socks5.AppendUserPassStatus(nil, ok))
		if !ok {
			return
		}
	}
	req, err := socks5.ReadRequest(c)
	if err != nil {
		t.Errorf("request: %v", err)
		return
	}
	if s.requests != nil {
		s.requests <- req
	}
	c.Write(socks5.AppendReply(nil, s.status, s.bound))
	if s.status != socks5.ReplySucceeded {
		return
	}
	if s.after != nil {
		s.after(c, req)
		return
	}
	io.Copy(c, c)
}

func (s *server) start(t *testing.T) string {
	return proxytest.Listen(t, func(c net.Conn) { s.serve(t, c) })
}

func newOutbound(t *testing.T, addr, user, pass string, h *proxytest.Hook) *Outbound {
	t.Helper()
	o, err := New(spec.Outbound{Tag: "up", Type: "socks", Server: addr, Username: user, Password: pass, UDP: true}, proxytest.Deps(h))
	if err != nil {
		t.Fatal(err)
	}
	return o
}
