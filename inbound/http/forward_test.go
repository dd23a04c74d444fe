package http

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
)

func TestForwardKeepAlive(t *testing.T) {
	o := newOrigin(t)
	conn, proxy := start(t, Config{})
	cl := dial(t, proxy)
	cl.send("GET http://" + o.hostPort() + "/one?x=1 HTTP/1.1\r\nHost: " + o.hostPort() + "\r\n" +
		"Proxy-Connection: keep-alive\r\nConnection: keep-alive, X-Hop\r\nX-Hop: secret\r\n" +
		"Keep-Alive: timeout=5\r\nTE: trailers\r\nUpgrade: h2c\r\nX-Keep: kept\r\n\r\n")
	resp, body := cl.response("GET")
	if resp.StatusCode != 200 || body != "GET /one?x=1 " {
		t.Fatalf("response %d %q", resp.StatusCode, body)
	}
	if resp.Header.Get("X-Origin") != "yes" {
		t.Fatal("an end-to-end response header was lost")
	}
	for _, h := range []string{"X-Resp-Hop", "Keep-Alive", "Connection"} {
		if v := resp.Header.Get(h); v != "" {
			t.Errorf("the client got hop-by-hop response header %s: %q", h, v)
		}
	}

	cl.send("POST http://" + o.hostPort() + "/two HTTP/1.1\r\nHost: " + o.hostPort() + "\r\n" +
		"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
	if resp, body := cl.response("POST"); resp.StatusCode != 200 || body != "POST /two hello" {
		t.Fatalf("second response %d %q", resp.StatusCode, body)
	}
	cl.send("HEAD http://" + o.hostPort() + "/three HTTP/1.1\r\nConnection: close\r\n\r\n")
	if resp, body := cl.response("HEAD"); resp.StatusCode != 200 || body != "" || !resp.Close {
		t.Fatalf("third response %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	cl.closed()

	reqs, conns := o.received()
	if len(reqs) != 3 {
		t.Fatalf("the origin got %d requests", len(reqs))
	}
	if conns != 1 {
		t.Fatalf("the origin saw %d connections; keep-alive should reuse one", conns)
	}
	first := reqs[0]
	if first.RequestURI != "/one?x=1" {
		t.Fatalf("origin request target %q, want origin form", first.RequestURI)
	}
	for _, h := range []string{"Proxy-Connection", "Connection", "X-Hop", "Keep-Alive", "Te", "Upgrade", "Proxy-Authorization"} {
		if v, ok := first.Header[h]; ok {
			t.Errorf("the origin got hop-by-hop header %s: %q", h, v)
		}
	}
	if first.Header.Get("X-Keep") != "kept" {
		t.Error("an end-to-end header was dropped")
	}
	if ua, ok := first.Header["User-Agent"]; ok {
		t.Errorf("the origin got a User-Agent the client did not send: %q", ua)
	}
	flows := conn.Flows()
	if len(flows) != 1 || flows[0].Protocol != "http" || flows[0].Dst.String() != o.hostPort() {
		t.Fatalf("flows %+v; want one http flow to %s", flows, o.hostPort())
	}
}

// An HTTP/1.0 client gets no chunked body: the body runs to the close.
func TestForwardHTTP10Client(t *testing.T) {
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "part one, ")
		w.(http.Flusher).Flush() // chunked toward the proxy
		io.WriteString(w, "part two")
	}))
	defer o.Close()
	_, proxy := start(t, Config{})
	cl := dial(t, proxy)
	cl.send("GET " + o.URL + "/ HTTP/1.0\r\n\r\n")
	raw, err := io.ReadAll(cl.br)
	if err != nil {
		t.Fatal(err)
	}
	head, body, _ := strings.Cut(string(raw), "\r\n\r\n")
	if strings.Contains(strings.ToLower(head), "chunked") || body != "part one, part two" {
		t.Fatalf("response to an HTTP/1.0 client:\n%s", raw)
	}
}

// A request to another origin on the same client connection dials anew.
func TestForwardSwitchesOrigin(t *testing.T) {
	a, b := newOrigin(t), newOrigin(t)
	conn, proxy := start(t, Config{})
	cl := dial(t, proxy)
	for _, o := range []*origin{a, b, a} {
		cl.send("GET http://" + o.hostPort() + "/ HTTP/1.1\r\nHost: " + o.hostPort() + "\r\n\r\n")
		if resp, _ := cl.response("GET"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if n := len(conn.Flows()); n != 3 {
		t.Fatalf("%d flows, want one per change of origin", n)
	}
}

// A kept origin connection that the origin closed is dialed again for a
// request without a body.
func TestForwardRetriesClosedOrigin(t *testing.T) {
	o := newOrigin(t)
	_, proxy := start(t, Config{})
	cl := dial(t, proxy)
	cl.send("GET http://" + o.hostPort() + "/a HTTP/1.1\r\n\r\n")
	cl.response("GET")
	o.CloseClientConnections()
	time.Sleep(50 * time.Millisecond)
	cl.send("GET http://" + o.hostPort() + "/b HTTP/1.1\r\n\r\n")
	if resp, body := cl.response("GET"); resp.StatusCode != 200 || body != "GET /b " {
		t.Fatalf("after the origin closed: %d %q", resp.StatusCode, body)
	}
}

func TestForwardSniffedHost(t *testing.T) {
	o := newOrigin(t)
	conn, proxy := start(t, Config{Sniff: true})
	cl := dial(t, proxy)
	cl.send("GET http://" + o.hostPort() + "/ HTTP/1.1\r\nHost: Named.Example:80\r\n\r\n")
	if resp, _ := cl.response("GET"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if f := conn.Flows()[0]; f.Sniffed != "named.example" || f.Protocol != "http" {
		t.Fatalf("flow sniffed %q protocol %q", f.Sniffed, f.Protocol)
	}
}

// A real HTTP client uses the proxy for plain requests and for TLS through
// CONNECT.
func TestNetHTTPClient(t *testing.T) {
	plain := newOrigin(t)
	secure := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure")
	}))
	defer secure.Close()
	conn, proxy := start(t, Config{Sniff: true})

	tr := secure.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(mustURL(t, "http://"+proxy))
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for _, u := range []string{plain.URL + "/p", secure.URL + "/s"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %q", u, resp.StatusCode, body)
		}
	}
	flows := conn.Flows()
	if len(flows) != 2 || flows[1].Protocol != "tls" {
		t.Fatalf("flows %+v; want a plain one and a sniffed TLS one", flows)
	}
}

// Server.Close does not wait for an origin that is slow to answer.
func TestCloseDuringForward(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	o := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
	}))
	defer o.Close()
	defer close(release)
	conn := inboundtest.NewConnector(t)
	srv := New(Config{}, conn, inboundtest.Logger(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	cl := dial(t, ln.Addr().String())
	cl.send("GET " + o.URL + "/slow HTTP/1.1\r\n\r\n")
	<-arrived

	start := time.Now()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %v", d)
	}
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	cl.closed()
}
