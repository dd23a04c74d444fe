package socks

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

// listen runs handle on every connection accepted on a loopback port until
// the test ends; cleanup closes the listener and every connection and waits
// for the handlers.
func listen(t *testing.T, handle func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

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
	return listen(t, func(c net.Conn) { s.serve(t, c) })
}

// hooked records the network of every socket the policy sees and refuses
// the networks in refuse.
type hooked struct {
	mu     sync.Mutex
	seen   []string
	refuse map[string]bool
}

var errRefusedByHook = errors.New("refused by the socket hook")

func (h *hooked) hook(s netx.SocketInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, s.Network)
	if h.refuse[s.Network] {
		return errRefusedByHook
	}
	return nil
}

func (h *hooked) networks() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

func newOutbound(t *testing.T, addr, user, pass string, h *hooked) *Outbound {
	t.Helper()
	p := netx.SocketPolicy{}
	if h != nil {
		p.Hook = h.hook
	}
	o, err := New(spec.Outbound{Tag: "up", Type: "socks", Server: addr, Username: user, Password: pass, UDP: true},
		outbound.Deps{Dialer: netx.NewDialer(p, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func tcpFlow(dst string) netx.Flow {
	a, err := netx.ParseAddr(dst)
	if err != nil {
		panic(err)
	}
	return netx.Flow{Network: netx.TCP, Dst: a, Src: netip.MustParseAddrPort("127.0.0.1:5555")}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// echoes writes msg on c and requires it back.
func echoes(t *testing.T, c net.Conn, msg []byte) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo %q, want %q", got, msg)
	}
}
