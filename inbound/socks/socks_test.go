package socks

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"

	"go.uber.org/goleak"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, cfg Config) (*inboundtest.Connector, string) {
	t.Helper()
	conn := inboundtest.NewConnector(t)
	if cfg.Tag == "" {
		cfg.Tag = "socks-in"
	}
	srv := New(cfg, conn, inboundtest.Logger(t))
	return conn, inboundtest.Serve(t, srv)
}

func TestConnect(t *testing.T) {
	v4, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	v4Port := uint16(v4.Addr().(*net.TCPAddr).Port)
	tests := []struct {
		name string
		dst  func(t *testing.T) netx.Addr
	}{
		{"ipv4", func(*testing.T) netx.Addr { return netx.AddrFromAddrPort(netip.MustParseAddrPort(v4.Addr().String())) }},
		{"ipv6", func(t *testing.T) netx.Addr {
			v6, ok := inboundtest.TCPEcho(t, "[::1]:0")
			if !ok {
				t.Skip("::1 is not available")
			}
			return netx.AddrFromAddrPort(netip.MustParseAddrPort(v6.Addr().String()))
		}},
		{"domain", func(*testing.T) netx.Addr { return netx.DomainAddr("localhost", v4Port) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := tt.dst(t)
			conn, proxy := start(t, Config{Tag: "s1"})
			c := dial(t, proxy, "", "")
			code, bound := request(t, c, socks5.CmdConnect, dst)
			if code != socks5.ReplySucceeded {
				t.Fatalf("reply %#x (%s)", code, socks5.ReplyText(code))
			}
			if !bound.IP.IsLoopback() || bound.Port == 0 {
				t.Fatalf("bound address %v is not the upstream's local address", bound)
			}
			echoes(t, c, []byte("hello through socks"))

			flows := conn.Flows()
			if len(flows) != 1 {
				t.Fatalf("%d flows", len(flows))
			}
			want := netx.Flow{Network: netx.TCP, Dst: dst, Src: netip.MustParseAddrPort(c.LocalAddr().String()), Inbound: "s1"}
			if flows[0] != want {
				t.Fatalf("flow = %+v, want %+v", flows[0], want)
			}
		})
	}
}

// A client that sends its greeting, request and first data in one write
// without waiting gets all its bytes through.
func TestConnectPipelined(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	_, proxy := start(t, Config{})
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	msg, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
	msg, _ = socks5.AppendRequest(msg, socks5.CmdConnect, netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String())))
	mustWrite(t, c, append(msg, "early data"...))
	if m, err := socks5.ReadMethodChoice(c); err != nil || m != socks5.MethodNoAuth {
		t.Fatalf("method %v, %v", m, err)
	}
	if code, _, err := socks5.ReadReply(c); err != nil || code != socks5.ReplySucceeded {
		t.Fatalf("reply %#x, %v", code, err)
	}
	// The echo may come back in more than one segment.
	got := make([]byte, len("early data"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "early data" {
		t.Fatalf("echo %q, %v", got, err)
	}
}

// ServeConn takes bytes already read from the connection: whatever of them
// follows the request reaches the upstream.
func TestServeConnFirstBytes(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	conn := inboundtest.NewConnector(t)
	srv := New(Config{}, conn, inboundtest.Logger(t))
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	first, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
	first, _ = socks5.AppendRequest(first, socks5.CmdConnect, netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String())))
	first = append(first, "already read"...)
	done := make(chan struct{})
	go func() { defer close(done); srv.ServeConn(sc, first) }()
	defer func() { c.Close(); <-done }()

	if _, err := socks5.ReadMethodChoice(c); err != nil {
		t.Fatal(err)
	}
	if code, _, err := socks5.ReadReply(c); err != nil || code != socks5.ReplySucceeded {
		t.Fatalf("reply %#x, %v", code, err)
	}
	got := make([]byte, len("already read"))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "already read" {
		t.Fatalf("echo %q, %v", got, err)
	}
}

func TestAuthentication(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	dst := netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))
	cfg := Config{Users: []spec.User{{Username: "bob", Password: "x"}, {Username: "alice", Password: "s3cret"}}}

	t.Run("right credentials", func(t *testing.T) {
		conn, proxy := start(t, cfg)
		c := dial(t, proxy, "alice", "s3cret")
		if code, _ := request(t, c, socks5.CmdConnect, dst); code != socks5.ReplySucceeded {
			t.Fatalf("reply %#x", code)
		}
		echoes(t, c, []byte("authenticated"))
		if f := conn.Flows()[0]; f.User != "alice" {
			t.Fatalf("flow user %q, want alice", f.User)
		}
	})
	t.Run("wrong password", func(t *testing.T) {
		conn, proxy := start(t, cfg)
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth, socks5.MethodUserPass)
		mustWrite(t, c, msg)
		if m, err := socks5.ReadMethodChoice(c); err != nil || m != socks5.MethodUserPass {
			t.Fatalf("method %#x, %v; want user/pass", m, err)
		}
		creds, _ := socks5.AppendUserPass(nil, "alice", "wrong")
		mustWrite(t, c, creds)
		status := make([]byte, 2)
		if _, err := c.Read(status); err != nil || status[0] != 0x01 || status[1] != 0x01 {
			t.Fatalf("status % x, %v; want 01 01", status, err)
		}
		closedByPeer(t, c)
		if n := len(conn.Flows()); n != 0 {
			t.Fatalf("%d flows after a refused login", n)
		}
	})
	t.Run("no-auth offer", func(t *testing.T) {
		_, proxy := start(t, cfg)
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg, _ := socks5.AppendGreeting(nil, socks5.MethodNoAuth)
		mustWrite(t, c, msg)
		choice := make([]byte, 2)
		if _, err := c.Read(choice); err != nil || choice[1] != socks5.MethodNoAcceptable {
			t.Fatalf("choice % x, %v; want 05 ff", choice, err)
		}
		closedByPeer(t, c)
	})
	t.Run("user/pass offer without users", func(t *testing.T) {
		_, proxy := start(t, Config{})
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		msg, _ := socks5.AppendGreeting(nil, socks5.MethodUserPass)
		mustWrite(t, c, msg)
		if _, err := socks5.ReadMethodChoice(c); err != socks5.ErrNoAcceptableMethod {
			t.Fatalf("err %v; want no acceptable method", err)
		}
	})
}

func TestFailureReplies(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := netx.AddrFromAddrPort(netip.MustParseAddrPort(ln.Addr().String()))
	ln.Close()

	t.Run("blocked", func(t *testing.T) {
		conn := inboundtest.NewConnector(t)
		conn.Err = fmt.Errorf("block[block]: %w", outbound.ErrBlocked)
		proxy := inboundtest.Serve(t, New(Config{Tag: "s"}, conn, inboundtest.Logger(t)))
		c := dial(t, proxy, "", "")
		if code, _ := request(t, c, socks5.CmdConnect, netx.DomainAddr("ads.example", 443)); code != socks5.ReplyNotAllowed {
			t.Fatalf("reply %#x, want 0x02", code)
		}
		closedByPeer(t, c)
	})
	t.Run("refused", func(t *testing.T) {
		_, proxy := start(t, Config{})
		c := dial(t, proxy, "", "")
		if code, _ := request(t, c, socks5.CmdConnect, closedPort); code != socks5.ReplyConnectionRefused {
			t.Fatalf("reply %#x, want 0x05", code)
		}
		closedByPeer(t, c)
	})
	t.Run("bind", func(t *testing.T) {
		conn, proxy := start(t, Config{})
		c := dial(t, proxy, "", "")
		if code, _ := request(t, c, socks5.CmdBind, closedPort); code != socks5.ReplyCommandNotSupported {
			t.Fatalf("reply %#x, want 0x07", code)
		}
		if n := len(conn.Flows()); n != 0 {
			t.Fatalf("BIND made %d flows", n)
		}
	})
	t.Run("udp disabled", func(t *testing.T) {
		_, proxy := start(t, Config{UDP: false})
		c := dial(t, proxy, "", "")
		if code, _ := request(t, c, socks5.CmdUDPAssociate, netx.Addr{}); code != socks5.ReplyCommandNotSupported {
			t.Fatalf("reply %#x, want 0x07", code)
		}
	})
	t.Run("address type", func(t *testing.T) {
		_, proxy := start(t, Config{})
		c := dial(t, proxy, "", "")
		mustWrite(t, c, []byte{5, 1, 0, 9, 1, 2, 3, 4, 0, 80})
		code, _, err := socks5.ReadReply(c)
		if err != nil || code != socks5.ReplyAddressTypeNotSupported {
			t.Fatalf("reply %#x, %v; want 0x08", code, err)
		}
	})
}
