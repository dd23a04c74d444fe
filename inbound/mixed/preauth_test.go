package mixed

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
)

// closedAfter sends b on a new connection to proxy and returns how long the
// proxy took to close it.
func closedAfter(t *testing.T, proxy string, b []byte) time.Duration {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if len(b) > 0 {
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection was not closed within 10s")
	}
	return time.Since(start)
}

// One deadline covers the wait for the first byte and the handshake of the
// protocol it picks: a few bytes hold a connection for the handshake
// timeout, not twice it.
func TestOneHandshakeTimeout(t *testing.T) {
	const timeout = time.Second
	proxy := inboundtest.Serve(t, New(Config{Tag: "m", HandshakeTimeout: timeout}, inboundtest.NewConnector(t), inboundtest.Logger(t)))
	for _, tc := range []struct {
		name  string
		bytes string
	}{
		{"nothing", ""},
		{"4 bytes of HTTP", "GET "},
		{"a SOCKS5 version byte", "\x05"},
		{"an HTTP head without its end", "GET http://x/ HTTP/1.1\r\nX: aaaa"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := closedAfter(t, proxy, []byte(tc.bytes))
			if d < timeout*8/10 || d >= 2*timeout*9/10 {
				t.Fatalf("closed after %v; want about %v", d, timeout)
			}
		})
	}
}

// The bound on handshakes holds for the port as a whole, whichever
// protocol each connection speaks.
func TestMixedHandshakeBound(t *testing.T) {
	log, logs := inboundtest.CaptureLogs(t)
	srv := New(Config{Tag: "m", MaxHandshakes: 2}, inboundtest.NewConnector(t), log)
	proxy := inboundtest.Serve(t, srv)
	for _, first := range []string{"\x05", "G"} {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte(first))
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.hs.InHandshake() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d in handshake", srv.hs.InHandshake())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := closedAfter(t, proxy, []byte("GET ")); d > 2*time.Second {
		t.Fatalf("a connection past the bound was closed after %v, not at once", d)
	}
	if n := len(logs.Lines(slog.LevelWarn, "too many connections in their handshake; closing new ones at once")); n != 1 {
		t.Fatalf("%d warn lines, want 1", n)
	}
}
