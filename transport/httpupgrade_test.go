package transport

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// The HTTP upgrade: one GET with Connection and Upgrade, a 101, then the
// raw bytes; bytes the server sent right after its 101 are not lost, and
// the stream half-closes.
func TestHTTPUpgrade(t *testing.T) {
	reqs := make(chan *http.Request, 1)
	server := accept(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		reqs <- req
		c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\nhello:"))
		io.Copy(c, br) // echo until the client half-closes
		c.Write([]byte(":bye"))
	})
	o := spec.Outbound{Server: server.String(), Transport: spec.Transport{Type: "httpupgrade", Path: "up", Host: "front.test"}}
	c, err := dial(t, o, deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := <-reqs
	if r.Method != "GET" || r.RequestURI != "/up" || r.Host != "front.test" || !strings.EqualFold(r.Header.Get("Connection"), "upgrade") ||
		r.Header.Get("Upgrade") != "websocket" || r.Header.Get("User-Agent") != DefaultUserAgent || r.Header.Get("Sec-WebSocket-Key") != "" {
		t.Fatalf("request %s %s, Host %q, headers %v", r.Method, r.RequestURI, r.Host, r.Header)
	}
	c.Write([]byte("ping"))
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "hello:ping:bye" {
		t.Fatalf("read %q, %v", got, err)
	}
}

func TestHTTPUpgradeRefused(t *testing.T) {
	for _, tc := range []struct{ resp, want string }{
		{"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", `the server answered "404 Not Found"`},
		{"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n", "does not upgrade to websocket"},
		{"SSH-2.0-OpenSSH\r\n", "reading the response"},
	} {
		server := accept(t, func(c net.Conn) {
			http.ReadRequest(bufio.NewReader(c))
			c.Write([]byte(tc.resp))
		})
		o := spec.Outbound{Server: server.String(), Transport: spec.Transport{Type: "httpupgrade"}}
		if _, err := dial(t, o, deps(nil)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("answer %q: error %v, want %q", tc.resp, err, tc.want)
		}
	}
}

// New fills in each transport's defaults and refuses what cannot work.
func TestNewTransportChecks(t *testing.T) {
	tlsTable := &spec.TLS{ServerName: "sni.test"}
	for _, tc := range []struct {
		name string
		o    spec.Outbound
		want string
	}{
		{"grpc mode", spec.Outbound{Server: "p:1", TLS: tlsTable, Transport: spec.Transport{Type: "grpc", Mode: "duplex"}}, `unknown grpc mode "duplex"`},
		{"grpc authority", spec.Outbound{Server: "p:1", TLS: tlsTable, Transport: spec.Transport{Type: "grpc", Authority: "a b"}}, "grpc authority"},
		{"ws reserved header", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Headers: map[string]string{"Host": "x"}}}, `ws header "Host" is set by the transport`},
		{"ws header value", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Headers: map[string]string{"X-A": "a\r\nB: b"}}}, "line break"},
		{"ws header name", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Headers: map[string]string{"X A": "a"}}}, "not an HTTP token"},
		{"ws path", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Path: "/a b"}}, "ws path"},
		{"ws early data negative", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", MaxEarlyData: -1}}, "negative"},
		{"ws ed not a number", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Path: "/?ed=lots"}}, "not a byte count"},
		{"ws early header in headers", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", MaxEarlyData: 10, Headers: map[string]string{"sec-websocket-protocol": "x"}}}, "carries the early data"},
		{"ws early header name", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", MaxEarlyData: 10, EarlyDataHeader: "X:Y"}}, "not an HTTP token"},
		{"httpupgrade host", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "httpupgrade", Host: "a\nb"}}, "httpupgrade host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.o, deps(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	// The three "missing" texts of the spec; defaults leave no gap through
	// New, so they are reached below it.
	if _, err := newWSConfig(spec.Transport{}, ""); err == nil || err.Error() != "missing ws host" {
		t.Errorf("ws without a host: %v", err)
	}
	if _, err := newGRPCConfig(spec.Transport{}, "", true); err == nil || err.Error() != "missing grpc authority" {
		t.Errorf("grpc without an authority: %v", err)
	}

	for _, tc := range []struct {
		name      string
		o         spec.Outbound
		host, uri string
	}{
		{"ws host from server_name", spec.Outbound{Server: "p:1", TLS: tlsTable, Transport: spec.Transport{Type: "ws"}}, "sni.test", "/"},
		{"ws host from the server", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Path: "x"}}, "p", "/x"},
		{"ws host set", spec.Outbound{Server: "p:1", TLS: tlsTable, Transport: spec.Transport{Type: "ws", Host: "cdn.test"}}, "cdn.test", "/"},
		{"ws ed path keeps the rest", spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Path: "/a?b=1&ed=2048"}}, "p", "/a?b=1"},
		{"httpupgrade on IPv6", spec.Outbound{Server: "[::1]:1", Transport: spec.Transport{Type: "httpupgrade"}}, "[::1]", "/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := New(tc.o, deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			var h httpHead
			if d.ws != nil {
				h = d.ws.head
			} else {
				h = d.upgrade.head
			}
			if h.host != tc.host || h.path != tc.uri {
				t.Fatalf("host %q path %q, want %q %q", h.host, h.path, tc.host, tc.uri)
			}
		})
	}
	d, err := New(spec.Outbound{Server: "p:1", Transport: spec.Transport{Type: "ws", Path: "/?ed=2048"}}, deps(nil))
	if err != nil || d.ws.maxEarly != 2048 || d.ws.earlyHeader != DefaultEarlyDataHeader {
		t.Fatalf("ed path: %+v, %v", d.ws, err)
	}
	d, err = New(spec.Outbound{Server: "p:1", TLS: tlsTable, Transport: spec.Transport{Type: "grpc", ServiceName: "s"}}, deps(nil))
	if err != nil || d.grpc.cfg.authority != "sni.test" || d.grpc.cfg.path != "/s/Tun" || d.tls.std.NextProtos[0] != "h2" {
		t.Fatalf("grpc defaults: %+v, %v", d.grpc.cfg, err)
	}
}

// A proxy transport carries no datagrams: a UDP destination is refused.
func TestDialNetworkRefusesUDP(t *testing.T) {
	ap := accept(t, echo)
	d, err := New(spec.Outbound{Server: ap.String()}, deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.DialNetwork(context.Background(), netx.UDP); !errors.Is(err, ErrDatagrams) || err.Error() != "a proxy transport carries no datagrams of its own" {
		t.Fatalf("UDP: %v", err)
	}
	c, err := d.DialNetwork(context.Background(), netx.TCP)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// A server on Go's net/http that flushes its 101, takes a moment, then
// hijacks the connection and drops the buffered reader Hijack hands back
// (sing-box's does) loses the first byte sent into that moment: its HTTP
// server keeps a one-byte read pending while the handler runs. The stream
// stays quiet for the grace after the 101, so the first bytes arrive whole.
func TestHTTPUpgradeQuietUntilTheServerHijacks(t *testing.T) {
	const pause = 20 * time.Millisecond // the server's moment between its 101 and the hijack
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "upgrade")
		w.Header().Set("Upgrade", "websocket")
		w.WriteHeader(http.StatusSwitchingProtocols)
		w.(http.Flusher).Flush()
		time.Sleep(pause)
		c, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 5)
		n, err := io.ReadFull(c, b)
		got <- fmt.Sprintf("%q %v", b[:n], err)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	d := newDialer(t, spec.Outbound{Server: ln.Addr().String(), Transport: spec.Transport{Type: "httpupgrade"}})
	d.upgrade.grace = 10 * pause
	c := dialCtx(t, d)
	defer c.Close()
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != `"hello" <nil>` {
		t.Fatalf("the server read %s, want \"hello\"", g)
	}
}

// The grace is spent inside the dial's deadline.
func TestHTTPUpgradeGraceEndsWithTheDial(t *testing.T) {
	server := accept(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"))
		io.Copy(io.Discard, c)
	})
	d := newDialer(t, spec.Outbound{Server: server.String(), Transport: spec.Transport{Type: "httpupgrade"}})
	d.upgrade.grace = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if c, err := d.Dial(ctx); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial: %v, want the deadline", err)
	}
}
