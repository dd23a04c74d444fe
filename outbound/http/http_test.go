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
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// listen runs handle on every connection accepted on a loopback port until
// the test ends.
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

// proxy reads a CONNECT request with net/http, answers with response (the
// raw bytes) and, when that is a whole 2xx head, echoes the tunnel; else it
// closes.
func proxy(t *testing.T, response string, requests chan<- *stdhttp.Request) string {
	return listen(t, func(c net.Conn) {
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

type hooked struct {
	mu     sync.Mutex
	seen   []string
	refuse bool
}

var errRefusedByHook = errors.New("refused by the socket hook")

func (h *hooked) hook(s netx.SocketInfo) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = append(h.seen, s.Network)
	if h.refuse {
		return errRefusedByHook
	}
	return nil
}

func newOutbound(t *testing.T, addr, user, pass string, h *hooked) *Outbound {
	t.Helper()
	p := netx.SocketPolicy{}
	if h != nil {
		p.Hook = h.hook
	}
	o, err := New(spec.Outbound{Tag: "up", Type: "http", Server: addr, Username: user, Password: pass},
		outbound.Deps{Dialer: netx.NewDialer(p, time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func flow(dst string) netx.Flow {
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

func echoes(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo %q, %v", got, err)
	}
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
			c, err := o.DialStream(ctxFor(t), flow(tc.dst))
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
			echoes(t, c, "through the tunnel")
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
		c, err := o.DialStream(ctxFor(t), flow("example.com:443"))
		if err != nil {
			t.Fatalf("%q: %v", resp, err)
		}
		echoes(t, c, "ok")
		c.Close()
	}
}

// Bytes the proxy sends behind the head belong to the flow; the tunnel still
// half-closes.
func TestConnectKeepsBytesAfterTheHead(t *testing.T) {
	addr := listen(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := stdhttp.ReadRequest(br); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\n\r\nSSH-2.0-banner\r\n"))
		b, _ := io.ReadAll(br)
		c.Write(b)
	})
	o := newOutbound(t, addr, "", "", nil)
	c, err := o.DialStream(ctxFor(t), flow("example.com:22"))
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
			c, err := o.DialStream(ctxFor(t), flow("example.com:443"))
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
			if tc.want == ErrHandshakeClosed.Error() && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%v does not match io.ErrUnexpectedEOF", err)
			}
		})
	}
}

func TestConnectHeadLimit(t *testing.T) {
	huge := "HTTP/1.1 200 OK\r\nX-Padding: " + strings.Repeat("p", headBufSize) + "\r\n\r\n"
	o := newOutbound(t, proxy(t, huge, nil), "", "", nil)
	_, err := o.DialStream(ctxFor(t), flow("example.com:443"))
	if !errors.Is(err, ErrFrameTooLarge) || err.Error() != "upstream frame larger than the client runtime's buffer" {
		t.Fatalf("error %v", err)
	}
	fits := "HTTP/1.1 200 OK\r\nX-Padding: " + strings.Repeat("p", headBufSize-40) + "\r\n\r\n"
	o = newOutbound(t, proxy(t, fits, nil), "", "", nil)
	c, err := o.DialStream(ctxFor(t), flow("example.com:443"))
	if err != nil {
		t.Fatalf("a head of %d bytes: %v", len(fits), err)
	}
	c.Close()
}

func TestConnectRefusedUpstream(t *testing.T) {
	ln, _ := net.Listen("tcp4", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err := newOutbound(t, addr, "", "", nil).DialStream(ctxFor(t), flow("example.com:443"))
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("error %v", err)
	}
}

func TestConnectHonoursTheContext(t *testing.T) {
	silent := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	o := newOutbound(t, silent, "", "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := o.DialStream(ctx, flow("example.com:443")); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := o.DialStream(ctx, flow("example.com:443")); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}

	o = newOutbound(t, proxy(t, "HTTP/1.1 200 OK\r\n\r\n", nil), "", "", nil)
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := o.DialStream(ctx, flow("example.com:443"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond)
	echoes(t, c, "the dial's deadline is gone")
}

func TestUnderTheSocketPolicy(t *testing.T) {
	addr := proxy(t, "HTTP/1.1 200 OK\r\n\r\n", nil)
	h := &hooked{}
	c, err := newOutbound(t, addr, "", "", h).DialStream(ctxFor(t), flow("example.com:443"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if !slices.Equal(h.seen, []string{"tcp4"}) {
		t.Fatalf("hooked sockets %v", h.seen)
	}
	h = &hooked{refuse: true}
	if _, err := newOutbound(t, addr, "", "", h).DialStream(ctxFor(t), flow("example.com:443")); !errors.Is(err, errRefusedByHook) {
		t.Fatalf("refused socket: %v", err)
	}
}

func TestNoUDP(t *testing.T) {
	o := newOutbound(t, "127.0.0.1:3128", "", "", nil)
	_, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if !errors.Is(err, outbound.ErrNoUDP) || err.Error() != "http carries no datagrams" {
		t.Fatalf("error %v", err)
	}
	if got := o.ProbeTarget(); got != netx.AddrFromAddrPort(netip.MustParseAddrPort("127.0.0.1:3128")) {
		t.Fatalf("probe target %v", got)
	}
}

func TestNew(t *testing.T) {
	deps := outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, time.Second)}
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
