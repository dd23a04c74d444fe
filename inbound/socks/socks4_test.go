package socks

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/protocol/socks4"
	"switchyard/route/sniff/snifftest"
	"switchyard/spec"
)

// dial4 opens a connection to the proxy and sends one SOCKS4 request,
// followed by extra in the same write; it returns the reply.
func dial4(t *testing.T, proxy string, dst netx.Addr, userID string, extra []byte) (net.Conn, byte, netip.AddrPort) {
	t.Helper()
	req, err := socks4.AppendRequest(nil, socks4.CmdConnect, dst, userID)
	if err != nil {
		t.Fatal(err)
	}
	return send4(t, proxy, append(req, extra...))
}

// send4 writes raw bytes to the proxy and reads a SOCKS4 reply.
func send4(t *testing.T, proxy string, raw []byte) (net.Conn, byte, netip.AddrPort) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(5 * time.Second))
	mustWrite(t, c, raw)
	code, bound, err := socks4.ReadReply(c)
	if err != nil {
		t.Fatalf("reply: %v", err)
	}
	return c, code, bound
}

func TestSOCKS4Connect(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	v4 := netip.MustParseAddrPort(echo.Addr().String())
	tests := []struct {
		name string
		dst  netx.Addr
		raw  []byte // sent instead of an encoded request, when set
	}{
		{"socks4 ipv4", netx.AddrFromAddrPort(v4), nil},
		{"socks4a domain", netx.DomainAddr("localhost", v4.Port()), nil},
		// A SOCKS4a client may name an IP in text: it becomes that IP.
		{"socks4a ip in text", netx.AddrFromAddrPort(v4),
			fmt.Appendf([]byte{4, 1, byte(v4.Port() >> 8), byte(v4.Port()), 0, 0, 0, 1}, "id\x00%s\x00", v4.Addr())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, proxy := start(t, Config{Tag: "s4"})
			var c net.Conn
			var code byte
			var bound netip.AddrPort
			if tt.raw != nil {
				c, code, bound = send4(t, proxy, tt.raw)
			} else {
				c, code, bound = dial4(t, proxy, tt.dst, "someone", nil)
			}
			if code != socks4.ReplyGranted {
				t.Fatalf("reply %#x (%s)", code, socks4.ReplyText(code))
			}
			if !bound.Addr().IsLoopback() || bound.Port() == 0 {
				t.Fatalf("bound address %v is not the upstream's local address", bound)
			}
			echoes(t, c, []byte("hello through socks4"))
			flows := conn.Flows()
			if len(flows) != 1 {
				t.Fatalf("%d flows", len(flows))
			}
			// Without users the user id is not the flow's user: nothing
			// vouches for it.
			want := netx.Flow{Network: netx.TCP, Dst: tt.dst, Src: netip.MustParseAddrPort(c.LocalAddr().String()), Inbound: "s4"}
			if flows[0] != want {
				t.Fatalf("flow = %+v, want %+v", flows[0], want)
			}
		})
	}
}

// Bytes the client sends right after its request, in the same write, reach
// the upstream.
func TestSOCKS4Pipelined(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	_, proxy := start(t, Config{})
	for _, dst := range []netx.Addr{
		netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String())),
		netx.DomainAddr("localhost", uint16(echo.Addr().(*net.TCPAddr).Port)),
	} {
		c, code, _ := dial4(t, proxy, dst, "", []byte("early data"))
		if code != socks4.ReplyGranted {
			t.Fatalf("reply %#x", code)
		}
		got := make([]byte, len("early data"))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "early data" {
			t.Fatalf("%v: echo %q, %v", dst, got, err)
		}
	}
}

func TestSOCKS4Users(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	dst := netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))
	users := []spec.User{{Username: "bob", Password: "x"}, {Username: "alice", Password: "s3cret"}}
	tests := []struct {
		name   string
		cfg    Config
		userID string
		code   byte
		user   string // the flow's user when granted
	}{
		{"no users, any id", Config{}, "mallory", socks4.ReplyGranted, ""},
		{"no users, socks4 set", Config{SOCKS4: true}, "", socks4.ReplyGranted, ""},
		{"users without socks4", Config{Users: users}, "alice", socks4.ReplyRejected, ""},
		{"users with socks4, a user's name", Config{Users: users, SOCKS4: true}, "alice", socks4.ReplyGranted, "alice"},
		{"users with socks4, the other user", Config{Users: users, SOCKS4: true}, "bob", socks4.ReplyGranted, "bob"},
		{"users with socks4, unknown id", Config{Users: users, SOCKS4: true}, "mallory", socks4.ReplyUserIDNotAllowed, ""},
		{"users with socks4, empty id", Config{Users: users, SOCKS4: true}, "", socks4.ReplyUserIDNotAllowed, ""},
		{"users with socks4, a password is no name", Config{Users: users, SOCKS4: true}, "s3cret", socks4.ReplyUserIDNotAllowed, ""},
		{"users with socks4, a name's prefix", Config{Users: users, SOCKS4: true}, "alic", socks4.ReplyUserIDNotAllowed, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn, proxy := start(t, tt.cfg)
			c, code, _ := dial4(t, proxy, dst, tt.userID, nil)
			if code != tt.code {
				t.Fatalf("reply %#x (%s), want %#x", code, socks4.ReplyText(code), tt.code)
			}
			if code != socks4.ReplyGranted {
				closedByPeer(t, c)
				if n := len(conn.Flows()); n != 0 {
					t.Fatalf("%d flows after a refusal", n)
				}
				return
			}
			echoes(t, c, []byte("as "+tt.userID))
			if f := conn.Flows()[0]; f.User != tt.user {
				t.Fatalf("flow user %q, want %q", f.User, tt.user)
			}
		})
	}
	// SOCKS4 beside users changes nothing for SOCKS5: it still needs the
	// password.
	_, proxy := start(t, Config{Users: users, SOCKS4: true})
	c := dial(t, proxy, "alice", "s3cret")
	if code, _ := request(t, c, 0x01, dst); code != 0 {
		t.Fatalf("SOCKS5 reply %#x", code)
	}
}

func TestSOCKS4Refusals(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedPort := netip.MustParseAddrPort(ln.Addr().String())
	ln.Close()
	head := func(cmd byte) string { return string([]byte{4, cmd, 0, 80, 127, 0, 0, 1}) }
	long := strings.Repeat("a", 256)

	tests := []struct {
		name string
		raw  string
		err  error // the connector's error, when it is asked
	}{
		{"bind", head(socks4.CmdBind) + "\x00", nil},
		{"bind 4a", "\x04\x02\x00\x15\x00\x00\x00\x01\x00ftp.example\x00", nil},
		{"unknown command", head(0x07) + "\x00", nil},
		{"user id too long", head(socks4.CmdConnect) + long + "\x00", nil},
		{"endless user id", head(socks4.CmdConnect) + strings.Repeat("a", 4096), nil},
		{"4a name too long", "\x04\x01\x00\x50\x00\x00\x00\x01\x00" + long + "\x00", nil},
		{"4a empty name", "\x04\x01\x00\x50\x00\x00\x00\x01\x00\x00", nil},
		{"4a name with a control byte", "\x04\x01\x00\x50\x00\x00\x00\x01\x00bad\x01name\x00", nil},
		{"refused dial", "\x04\x01" + string([]byte{byte(closedPort.Port() >> 8), byte(closedPort.Port())}) + "\x7f\x00\x00\x01\x00", nil},
		{"blocked", head(socks4.CmdConnect) + "\x00", fmt.Errorf("block[block]: %w", outbound.ErrBlocked)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := inboundtest.NewConnector(t)
			conn.Err = tt.err
			proxy := inboundtest.Serve(t, New(Config{Tag: "s"}, conn, inboundtest.Logger(t)))
			c, code, _ := send4(t, proxy, []byte(tt.raw))
			if code != socks4.ReplyRejected {
				t.Fatalf("reply %#x (%s), want 0x5b", code, socks4.ReplyText(code))
			}
			// The server closes; with bytes of the request it left unread
			// the kernel resets the connection instead of ending it.
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := c.Read(make([]byte, 1)); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("read after refusal = %d, %v; want the connection closed", n, err)
			}
			wantFlows := 0
			if strings.HasPrefix(tt.name, "refused") || tt.err != nil {
				wantFlows = 1
			}
			if n := len(conn.Flows()); n != wantFlows {
				t.Fatalf("%d flows, want %d", n, wantFlows)
			}
		})
	}
}

// A client that ends its side in the middle of a request gets no reply; the
// connection is closed at once, not at the handshake deadline.
func TestSOCKS4Truncated(t *testing.T) {
	_, proxy := start(t, Config{})
	for _, raw := range []string{"\x04", "\x04\x01\x00\x50\x7f\x00\x00\x01ali", "\x04\x01\x00\x50\x00\x00\x00\x01\x00exam"} {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		mustWrite(t, c, []byte(raw))
		c.(*net.TCPConn).CloseWrite()
		start := time.Now()
		closedByPeer(t, c)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%q: closed after %v", raw, d)
		}
	}
}

// With sniff = true a SOCKS4 CONNECT is granted before the dial, as a
// SOCKS5 one is, and the flow carries the sniffed name.
func TestSOCKS4Sniff(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	dst := netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))
	conn, proxy := start(t, Config{Sniff: true})
	hello := snifftest.ClientHello(t, "sniffed.example.com")
	c, code, bound := dial4(t, proxy, dst, "", hello[:30])
	if code != socks4.ReplyGranted || bound != netip.MustParseAddrPort("0.0.0.0:0") {
		t.Fatalf("reply %#x %v; want granted from 0.0.0.0:0", code, bound)
	}
	mustWrite(t, c, hello[30:])
	got := make([]byte, len(hello))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != string(hello) {
		t.Fatalf("the ClientHello did not come back whole: %v", err)
	}
	if f := conn.Flows()[0]; f.Sniffed != "sniffed.example.com" || f.Protocol != "tls" || f.Dst != dst {
		t.Fatalf("flow %+v", f)
	}
}
