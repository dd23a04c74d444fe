package http

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"switchyard/inbound/internal/inboundtest"
)

// syncBuffer is a log sink the server's goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Debug lines about a refused request quote at most a few hundred bytes of
// what the client sent, with its length: never a request line or a target
// of tens of KiB.
func TestRefusedRequestsLogAClippedTarget(t *testing.T) {
	long := strings.Repeat("a", 32<<10) // long, but within the 64 KiB head limit
	for _, tc := range []struct{ name, req, want string }{
		{"malformed request line", "GET " + long + "\r\n\r\n", "(327"},
		{"not a proxy request", "GET /" + long + " HTTP/1.1\r\nHost: x\r\n\r\n", "(327"},
		{"not an http target", "GET ftp://" + long + "/ HTTP/1.1\r\nHost: x\r\n\r\n", "(327"},
		{"a bad CONNECT target", "CONNECT " + long + " HTTP/1.1\r\nHost: x\r\n\r\n", "bytes)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			proxy := inboundtest.Serve(t, New(Config{Tag: "http-in"}, inboundtest.NewConnector(t), log))
			cl := dial(t, proxy)
			cl.send(tc.req)
			io.Copy(io.Discard, cl.c) // the proxy answers and closes
			out := logs.String()
			if !strings.Contains(out, "http request refused") && !strings.Contains(out, "http connect refused") {
				t.Fatalf("no refusal logged: %.300s", out)
			}
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if len(line) > 1000 {
					t.Errorf("a log line of %d bytes: %.300s", len(line), line)
				}
			}
			if !strings.Contains(out, tc.want) {
				t.Errorf("the length of what was cut is not noted: %.600s", out)
			}
		})
	}
}
