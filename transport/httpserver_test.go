package transport

import (
	"bufio"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"

	"github.com/gorilla/websocket"
)

// serveHTTP runs an HTTP/1.1 server on loopback (over TLS when cfg is set).
// Cleanup closes the listener and every connection, hijacked ones too, and
// waits for every handler.
func serveHTTP(t *testing.T, cfg *tls.Config, h http.HandlerFunc) netip.AddrPort {
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
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			wg.Add(1)
			defer wg.Done()
			h(w, r)
		}),
		ConnState: func(c net.Conn, s http.ConnState) {
			if s == http.StateNew {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		},
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){}, // HTTP/1.1 only
	}
	var l net.Listener = ln
	if cfg != nil {
		l = tls.NewListener(ln, cfg)
	}
	served := make(chan struct{})
	go func() { srv.Serve(l); close(served) }()
	t.Cleanup(func() {
		srv.Close()
		<-served
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// wsRequests records the upgrade requests a test server saw.
type wsRequests struct {
	mu   sync.Mutex
	reqs []*http.Request
}

func (r *wsRequests) add(req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
}

func (r *wsRequests) last(t *testing.T) *http.Request {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.reqs) == 0 {
		t.Fatal("the server saw no request")
	}
	return r.reqs[len(r.reqs)-1]
}

// wsEchoServer upgrades with gorilla's server (an implementation of its
// own) and echoes every message; early data found in the
// Sec-WebSocket-Protocol header (or header, when set) is echoed first.
func wsEchoServer(t *testing.T, cfg *tls.Config, header string, seen *wsRequests) netip.AddrPort {
	if header == "" {
		header = DefaultEarlyDataHeader
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	return serveHTTP(t, cfg, func(w http.ResponseWriter, r *http.Request) {
		seen.add(r)
		early := r.Header.Get(header)
		var respHeader http.Header
		if early != "" && header == "Sec-WebSocket-Protocol" {
			respHeader = http.Header{"Sec-WebSocket-Protocol": {early}}
		}
		c, err := up.Upgrade(w, r, respHeader)
		if err != nil {
			return
		}
		defer c.Close()
		if early != "" {
			data, err := decodeEarly(early)
			if err != nil {
				return
			}
			if c.WriteMessage(websocket.BinaryMessage, data) != nil {
				return
			}
		}
		for {
			typ, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if typ != websocket.BinaryMessage {
				c.WriteMessage(websocket.TextMessage, []byte("not binary"))
				return
			}
			if c.WriteMessage(websocket.BinaryMessage, msg) != nil {
				return
			}
		}
	})
}

// rawWSServer does the upgrade by hand and hands the raw connection to
// script, for frames no library would send.
func rawWSServer(t *testing.T, script func(c net.Conn, br *bufio.Reader)) netip.AddrPort {
	return rawWSServerOver(t, nil, script)
}

// rawWSServerOver is rawWSServer behind TLS when cfg is set.
func rawWSServerOver(t *testing.T, cfg *tls.Config, script func(c net.Conn, br *bufio.Reader)) netip.AddrPort {
	return accept(t, func(c net.Conn) {
		if cfg != nil {
			tc := tls.Server(c, cfg)
			if tc.Handshake() != nil {
				return
			}
			c = tc
		}
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " +
			acceptKey(req.Header.Get("Sec-WebSocket-Key")) + "\r\n\r\n"
		if _, err := c.Write([]byte(resp)); err != nil {
			return
		}
		script(c, br)
	})
}
