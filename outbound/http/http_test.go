package http

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	stdhttp "net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/proxytest"
	"switchyard/spec"
)

// proxy reads a CONNECT request with net/http, answers with response (the
// raw bytes) and, when that is a whole 2xx head, echoes the tunnel; else it
// closes.
func proxy(t *testing.T, response string, requests chan<- *stdhttp.Request) string {
	return proxytest.Listen(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := stdhttp.ReadRequest(br)
		if err != nil {
			return
		}
		if requests != nil {
			requests <- req
		}
		c.Write([]byte(response))
		whole := strings.HasSuffix(response, "\n\n") || strings.HasSuffix(response, "\r\n\r\n")
		if whole && (strings.HasPrefix(response, "HTTP/1.1 2") || strings.HasPrefix(response, "HTTP/1.0 2")) {
			io.Copy(c, br)
		}
	})
}

func newOutbound(t *testing.T, addr, user, pass string, h *proxytest.Hook) *Outbound {
	t.Helper()
	o, err := New(spec.Outbound{Tag: "up", Type: "http", Server: addr, Username: user, Password: pass}, proxytest.Deps(h))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestConnectRequest(t *testing.T) {
	for _, tc := range []struct{ name, dst, user, pass, wantAuth string }{
		{"domain", "example.com:443", "", "", ""},
		{"IPv4", "192.0.2.1:8443", "", "", ""},
		{"IPv6", "[2001:db8::1]:443", "", "", ""},
		{"credentials", "example.com:443", "alice", "p:ss", "Basic YWxpY2U6cDpzcw=="},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reqs := make(chan *stdhttp.Request, 1)
			o := newOutbound(t, proxy(t, "HTTP/1.1 200 Connection established\r\n\r\n", reqs), tc.user, tc.pass, nil)
			c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow(tc.dst))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			req := <-reqs
			if req.Method != "CONNECT" || req.RequestURI != tc.dst || req.Host != tc.dst {
				t.Fatalf("request %s %s, Host %s; want CONNECT %s", req.Method, req.RequestURI, req.Host, tc.dst)
			}
			if got := req.Header.Get("Proxy-Authorization"); got != tc.wantAuth {
				t.Fatalf("Proxy-Authorization %q, want %q", got, tc.wantAuth)
			}
			if _, ok := c.(*net.TCPConn); !ok {
				t.Fatalf("the tunnel is a %T, not the proxy's TCP connection", c)
			}
			proxytest.Echoes(t, c, []byte("through the tunnel"))
		})
	}
}

func TestConnectRequestBytes(t *testing.T) {
	b, err := appendConnect(nil, netx.DomainAddr("example.com", 443), "Proxy-Authorization: Basic eA==\r\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nProxy-Authorization: Basic eA==\r\n\r\n"
	if string(b) != want {
		t.Fatalf("request %q", b)
	}
	for _, bad := range []netx.Addr{{}, netx.DomainAddr("evil\r\nX: y", 80), netx.DomainAddr("a b", 80), netx.DomainAddr("user@host", 80)} {
		if _, err := appendConnect(nil, bad, ""); err == nil {
			t.Errorf("%q was written in a request line", bad.Name)
		}
	}
}

func TestConnectAcceptedResponses(t *testing.T) {
	for _, resp := range []string{
		"HTTP/1.1 200 Connection established\r\n\r\n",
		"HTTP/1.0 200 OK\r\nProxy-Agent: x\r\nVia: 1.1 y\r\n\r\n",
		"HTTP/1.1 204\n\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	} {
		o := newOutbound(t, proxy(t, resp, nil), "", "", nil)
		c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
		if err != nil {
			t.Fatalf("%q: %v", resp, err)
		}
		proxytest.Echoes(t, c, []byte("ok"))
		c.Close()
	}
}

// Bytes the proxy sends behind the head belong to the flow; the tunnel still
// half-closes.
func TestConnectKeepsBytesAfterTheHead(t *testing.T) {
	addr := proxytest.Listen(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := stdhttp.ReadRequest(br); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\n\r\nSSH-2.0-banner\r\n"))
		b, _ := io.ReadAll(br)
		c.Write(b)
	})
	o := newOutbound(t, addr, "", "", nil)
	c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:22"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, 16)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "SSH-2.0-banner\r\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	c.Write([]byte("bye"))
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "bye" {
		t.Fatalf("after half-close read %q, %v", rest, err)
	}
}

func TestConnectRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, response, want string
		code                 int
	}{
		{"auth required", "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n", `http: proxy answered "HTTP/1.1 407 Proxy Authentication Required"`, 407},
		{"forbidden", "HTTP/1.1 403 Forbidden\r\n\r\n", `http: proxy answered "HTTP/1.1 403 Forbidden"`, 403},
		{"bad gateway", "HTTP/1.0 502 Bad Gateway\r\n\r\n", `http: proxy answered "HTTP/1.0 502 Bad Gateway"`, 502},
		{"redirect", "HTTP/1.1 301 Moved\r\n", `http: proxy answered "HTTP/1.1 301 Moved"`, 301},
		{"not HTTP", "SSH-2.0-OpenSSH\r\n", `http: malformed status line "SSH-2.0-OpenSSH"`, 0},
		{"closed in the head", "HTTP/1.1 200 OK\r\nVia: x", "upstream closed during the handshake", 0},
		{"closed at once", "", "upstream closed during the handshake", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOutbound(t, proxy(t, tc.response, nil), "", "", nil)
			c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
			if err == nil {
				c.Close()
				t.Fatal("dial succeeded")
			}
			if err.Error() != tc.want {
				t.Fatalf("error %q, want %q", err, tc.want)
			}
			var se *StatusError
			if got := errors.As(err, &se); got != (tc.code != 0) || (got && se.Code != tc.code) {
				t.Fatalf("status error %v, want code %d", se, tc.code)
			}
			if tc.want == proxyconn.ErrHandshakeClosed.Error() && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%v does not match io.ErrUnexpectedEOF", err)
			}
		})
	}
}

func TestConnectHeadLimit(t *testing.T) {
	huge := "HTTP/1.1 200 OK\r\nX-Padding: " + strings.Repeat("p", headBufSize) + "\r\n\r\n"
	o := newOutbound(t, proxy(t, huge, nil), "", "", nil)
	_, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
	if !errors.Is(err, proxyconn.ErrUpstreamFrameTooLarge) || err.Error() != "upstream frame larger than the client runtime's buffer" {
		t.Fatalf("error %v", err)
	}
	fits := "HTTP/1.1 200 OK\r\nX-Padding: " + strings.Repeat("p", headBufSize-40) + "\r\n\r\n"
	o = newOutbound(t, proxy(t, fits, nil), "", "", nil)
	c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
	if err != nil {
		t.Fatalf("a head of %d bytes: %v", len(fits), err)
	}
	c.Close()
}

func TestConnectRefusedUpstream(t *testing.T) {
	_, err := newOutbound(t, proxytest.RefusedAddr(t), "", "", nil).DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("error %v", err)
	}
}

func TestConnectHonoursTheContext(t *testing.T) {
	silent := proxytest.Listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	answering := proxy(t, "HTTP/1.1 200 OK\r\n\r\n", nil)
	proxytest.DialHonoursTheContext(t, newOutbound(t, silent, "", "", nil), newOutbound(t, answering, "", "", nil))
}

func TestUnderTheSocketPolicy(t *testing.T) {
	addr := proxy(t, "HTTP/1.1 200 OK\r\n\r\n", nil)
	h := &proxytest.Hook{}
	c, err := newOutbound(t, addr, "", "", h).DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !slices.Equal(h.Networks(), []string{"tcp4"}) {
		t.Fatalf("hooked sockets %v", h.Networks())
	}
	h = &proxytest.Hook{Refuse: map[string]bool{"tcp4": true}}
	if _, err := newOutbound(t, addr, "", "", h).DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:443")); !errors.Is(err, proxytest.ErrRefusedByHook) {
		t.Fatalf("refused socket: %v", err)
	}
}

func TestNoUDP(t *testing.T) {
	var h proxytest.Hook
	o := newOutbound(t, "127.0.0.1:3128", "", "", &h)
	if o.CarriesUDP() {
		t.Fatal("http reports CarriesUDP true")
	}
	_, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if !errors.Is(err, outbound.ErrNoUDP) || err.Error() != "http carries no datagrams" {
		t.Fatalf("error %v", err)
	}
	if s := h.Networks(); len(s) != 0 {
		t.Fatalf("the refusal opened sockets: %v", s)
	}
	if got := o.ProbeTarget(); got != netx.AddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:3128")) {
		t.Fatalf("probe target %v", got)
	}
}

func TestNew(t *testing.T) {
	deps := proxytest.Deps(nil)
	for _, bad := range []spec.Outbound{
		{Type: "http", Server: "no-port"},
		{Type: "http", Server: "p:3128", AddressFamily: "sideways"},
		{Type: "http", Server: "p:3128", Transport: spec.Transport{Type: "quic"}},
		{Type: "http", Server: "p:3128", Username: "a:b", Password: "c"},
	} {
		if _, err := New(bad, deps); err == nil {
			t.Errorf("%+v built", bad)
		}
	}
	if _, err := New(spec.Outbound{Type: "http", Server: "p:3128"}, outbound.Deps{}); err == nil {
		t.Error("built without a dialer")
	}
}

func TestHeadParserAcrossReads(t *testing.T) {
	head := []byte("HTTP/1.1 200 OK\r\nA: b\r\n\r\nrest")
	for split := 1; split < len(head); split++ {
		var p headParser
		end, err := p.parse(head[:split])
		if err != nil {
			t.Fatalf("split %d: %v", split, err)
		}
		if end == 0 {
			end, err = p.parse(head)
		}
		if err != nil || end != len(head)-4 {
			t.Fatalf("split %d: end %d, %v", split, end, err)
		}
	}
	if !bytes.Equal(head[len(head)-4:], []byte("rest")) {
		t.Fatal("bad test")
	}
}
