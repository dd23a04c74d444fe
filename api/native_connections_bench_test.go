package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"switchyard/config"
	"switchyard/supervisor"
	"switchyard/track"
)

// benchRig is the API over a supervisor of baseConfig, served to the
// caller's requests directly, and n flows in its tracker.
func benchRig(b testing.TB, n int) (*Server, []*track.Conn) {
	b.Helper()
	s, _, err := config.Parse([]byte(strings.ReplaceAll(baseConfig, "WEB", "http://127.0.0.1:9")), "api-bench.toml")
	if err != nil {
		b.Fatal(err)
	}
	sv, err := supervisor.New(s, supervisor.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := sv.Start(); err != nil {
		b.Fatal(err)
	}
	srv := New(sv, Options{Spec: s})
	conns := make([]*track.Conn, n)
	for i := range conns {
		conns[i] = sv.Tracker().Conn(fakeMeta(i), nopConn{})
	}
	b.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
		srv.Close()
		sv.Close()
	})
	return srv, conns
}

// discardResponse is a ResponseWriter that keeps nothing, so a benchmark
// measures the handler and not a recorder's buffer.
type discardResponse struct {
	h http.Header
	n int64
}

func (d *discardResponse) Header() http.Header         { return d.h }
func (d *discardResponse) WriteHeader(int)             {}
func (d *discardResponse) Write(p []byte) (int, error) { d.n += int64(len(p)); return len(p), nil }

// BenchmarkConnections10k is GET /connections, through the router and its
// guards, with 10,000 open flows (each rendered once before the timer).
func BenchmarkConnections10k(b *testing.B) {
	srv, _ := benchRig(b, 10000)
	req := httptest.NewRequest("GET", "/connections", nil)
	req.Host = "127.0.0.1"
	w := &discardResponse{h: http.Header{}}
	srv.Handler().ServeHTTP(w, req)
	b.SetBytes(w.n)
	b.ReportAllocs()
	for b.Loop() {
		w.n = 0
		srv.Handler().ServeHTTP(w, req)
	}
}

// BenchmarkDeltaTick10k100changing is one message of the native delta
// stream with 10,000 open flows of which 100 moved since the message
// before.
func BenchmarkDeltaTick10k100changing(b *testing.B) {
	srv, conns := benchRig(b, 10000)
	f := newDeltaFeed(srv)
	f.message(io.Discard)
	var n countingWriter
	next := 0
	b.ReportAllocs()
	for b.Loop() {
		for range 100 {
			conns[next%len(conns)].ObserveWrite(1)
			next += 101
		}
		n = 0
		f.message(&n)
	}
	b.SetBytes(int64(n))
}
