package http

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/inbound/internal/inboundtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func start(t *testing.T, cfg Config) (*inboundtest.Connector, string) {
	t.Helper()
	conn := inboundtest.NewConnector(t)
	if cfg.Tag == "" {
		cfg.Tag = "http-in"
	}
	return conn, inboundtest.Serve(t, New(cfg, conn, inboundtest.Logger(t)))
}

// client is a raw client connection to the proxy.
type client struct {
	t  *testing.T
	c  net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, proxy string) *client {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &client{t: t, c: c, br: bufio.NewReader(c)}
}

func (cl *client) send(s string) {
	cl.t.Helper()
	if _, err := io.WriteString(cl.c, s); err != nil {
		cl.t.Fatal(err)
	}
}

// response reads one response and its body.
func (cl *client) response(method string) (*http.Response, string) {
	cl.t.Helper()
	resp, err := http.ReadResponse(cl.br, &http.Request{Method: method})
	if err != nil {
		cl.t.Fatalf("response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		cl.t.Fatalf("response body: %v", err)
	}
	return resp, string(body)
}

// established reads the answer to a CONNECT that opened its tunnel.
func (cl *client) established() {
	cl.t.Helper()
	line, err := cl.br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 200 Connection established\r\n" {
		cl.t.Fatalf("status line %q, %v", line, err)
	}
	if blank, _ := cl.br.ReadString('\n'); blank != "\r\n" {
		cl.t.Fatalf("header %q after the status line", blank)
	}
}

// closed checks that the proxy closed the connection.
func (cl *client) closed() {
	cl.t.Helper()
	cl.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := cl.br.Read(make([]byte, 1)); err != io.EOF {
		cl.t.Fatalf("read = %d, %v; want EOF", n, err)
	}
}

// origin is an HTTP server that records what it receives.
type origin struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	conns    int
}

func newOrigin(t *testing.T) *origin {
	o := &origin{}
	o.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		o.mu.Lock()
		o.requests = append(o.requests, r)
		o.mu.Unlock()
		w.Header().Set("Connection", "X-Resp-Hop")
		w.Header().Set("X-Resp-Hop", "hidden")
		w.Header().Set("Keep-Alive", "timeout=30")
		w.Header().Set("X-Origin", "yes")
		fmt.Fprintf(w, "%s %s %s", r.Method, r.RequestURI, body)
	}))
	o.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.mu.Lock()
			o.conns++
			o.mu.Unlock()
		}
	}
	o.Start()
	t.Cleanup(o.Close)
	return o
}

func (o *origin) received() ([]*http.Request, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]*http.Request(nil), o.requests...), o.conns
}

func (o *origin) hostPort() string { return strings.TrimPrefix(o.URL, "http://") }

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
