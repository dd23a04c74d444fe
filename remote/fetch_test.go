package remote

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testDial dials directly and records the via it was asked for.
type testDial struct {
	mu   sync.Mutex
	vias []string
}

func (d *testDial) dial(ctx context.Context, via, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.vias = append(d.vias, via)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func fetcher(t *testing.T) (*Fetcher, *testDial) {
	d := &testDial{}
	return &Fetcher{Dial: d.dial, UserAgent: UserAgent("test")}, d
}

func resource(t *testing.T, url string) Resource {
	return Resource{Kind: KindProvider, Tag: "sub", URL: url, Via: "direct", CachePath: filepath.Join(t.TempDir(), "c", "sub.txt")}
}

// A server with an ETag: the second download is a 304, one full body
// served in all; the cache holds the body and its meta.
func TestETagIsRespected(t *testing.T) {
	var full, conditional atomic.Int32
	var ua atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ua.Store(r.Header.Get("User-Agent"))
		if r.Header.Get("If-None-Match") == `"v1"` {
			conditional.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		full.Add(1)
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Subscription-Userinfo", "upload=10; download=20; total=100; expire=1700000000")
		w.Write([]byte("socks5://127.0.0.1:1#A\n"))
	}))
	defer srv.Close()
	f, d := fetcher(t)
	r := resource(t, srv.URL+"/sub?token=secret")
	out, err := f.Fetch(context.Background(), r)
	if err != nil || !out.Changed {
		t.Fatalf("first download: %+v %v", out, err)
	}
	out, err = f.Fetch(context.Background(), r)
	if err != nil || out.Changed || !out.NotModified {
		t.Fatalf("second download: %+v %v", out, err)
	}
	if full.Load() != 1 || conditional.Load() != 1 {
		t.Fatalf("full %d conditional %d, want 1 and 1", full.Load(), conditional.Load())
	}
	if b, _ := os.ReadFile(r.CachePath); string(b) != "socks5://127.0.0.1:1#A\n" {
		t.Fatalf("cache %q", b)
	}
	if fi, err := os.Stat(r.CachePath); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("cache mode %v %v", fi.Mode(), err)
	}
	m, ok := ReadMeta(r.CachePath)
	if !ok || m.ETag != `"v1"` || m.URL != r.URL || m.UserInfo == nil || *m.UserInfo != (UserInfo{10, 20, 100, 1700000000}) || m.SHA256 == "" {
		t.Fatalf("meta %+v", m)
	}
	if got := ua.Load().(string); !strings.HasPrefix(got, "clash.meta/") || !strings.Contains(got, "switchyard/test") {
		t.Fatalf("User-Agent %q", got)
	}
	if len(d.vias) != 2 || d.vias[0] != "direct" {
		t.Fatalf("dialed via %q", d.vias)
	}
}

// Last-Modified is sent back as If-Modified-Since.
func TestLastModifiedIsRespected(t *testing.T) {
	const stamp = "Mon, 02 Jan 2006 15:04:05 GMT"
	var full atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("If-Modified-Since") == stamp {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		full.Add(1)
		w.Header().Set("Last-Modified", stamp)
		w.Write([]byte("socks5://127.0.0.1:1#A\n"))
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	r := resource(t, srv.URL)
	for i := 0; i < 3; i++ {
		if _, err := f.Fetch(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if full.Load() != 1 {
		t.Fatalf("%d full downloads, want 1", full.Load())
	}
}

// A server without validators answering the same body again: not a
// change (no reload), UpdatedAt kept.
func TestSameBodyIsUnchanged(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("socks5://127.0.0.1:1#A\n"))
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	r := resource(t, srv.URL)
	first, err := f.Fetch(context.Background(), r)
	if err != nil || !first.Changed {
		t.Fatal(first, err)
	}
	again, err := f.Fetch(context.Background(), r)
	if err != nil || again.Changed || again.NotModified || !again.Meta.UpdatedAt.Equal(first.Meta.UpdatedAt) {
		t.Fatalf("%+v %v", again, err)
	}
}

// Content that fails Validate never replaces the cache.
func TestBadContentKeepsTheCache(t *testing.T) {
	body := "socks5://127.0.0.1:1#A\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(body)) }))
	defer srv.Close()
	f, _ := fetcher(t)
	r := resource(t, srv.URL)
	r.Validate = func(b []byte) (int, error) {
		if !bytes.HasPrefix(b, []byte("socks5://")) {
			return 0, errors.New("not a link list")
		}
		return bytes.Count(b, []byte("\n")), nil
	}
	if out, err := f.Fetch(context.Background(), r); err != nil || out.Meta.Entries != 1 {
		t.Fatal(out, err)
	}
	body = "<html>maintenance</html>"
	_, err := f.Fetch(context.Background(), r)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a link list") {
		t.Fatalf("error %v", err)
	}
	if b, _ := os.ReadFile(r.CachePath); string(b) != "socks5://127.0.0.1:1#A\n" {
		t.Fatalf("cache replaced: %q", b)
	}
}

// A body over the limit is an error naming the limit, with and without a
// Content-Length; the cache is not written.
func TestSizeLimit(t *testing.T) {
	big := strings.Repeat("x", 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.Write([]byte(big[:1024]))
			w.(http.Flusher).Flush()
			w.Write([]byte(big[1024:]))
			return
		}
		w.Header().Set("Content-Length", "4096")
		w.Write([]byte(big))
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	for _, path := range []string{"/length", "/chunked"} {
		r := resource(t, srv.URL+path)
		r.MaxSize = 2 << 20 >> 10 // 2 KiB
		_, err := f.Fetch(context.Background(), r)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("%s: error %v", path, err)
		}
		if _, err := os.Stat(r.CachePath); err == nil {
			t.Fatalf("%s: the cache was written", path)
		}
	}
	if d := (&Resource{Kind: KindRuleSet}).maxSize(); d != 64<<20 {
		t.Fatalf("rule set limit %d", d)
	}
	if d := (&Resource{Kind: KindProvider}).maxSize(); d != 32<<20 {
		t.Fatalf("provider limit %d", d)
	}
}

// A server that accepts and never answers fails the download by its
// deadline; so does one that sends a header and then stalls its body.
func TestADownloadThatNeverAnswersFailsByItsDeadline(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns sync.WaitGroup
	defer conns.Wait()
	defer ln.Close()
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				buf := make([]byte, 4096)
				c.Read(buf)
				if bytes.Contains(buf, []byte("/stall")) {
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc"))
				}
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				c.Read(buf) // until the client gives up
			}()
		}
	}()
	f, _ := fetcher(t)
	f.Timeout = 300 * time.Millisecond
	for _, path := range []string{"/silent", "/stall"} {
		start := time.Now()
		_, err := f.Fetch(context.Background(), resource(t, "http://"+ln.Addr().String()+path))
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "no complete answer within 300ms") {
			t.Fatalf("%s: error %v", path, err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("%s: took %s", path, el)
		}
	}
}

// An error other than 200 and 304 is one, naming the status; the URL is
// written without its query.
func TestStatusError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "no", http.StatusForbidden)
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	_, err := f.Fetch(context.Background(), resource(t, srv.URL+"/s?token=secret"))
	if !errors.Is(err, ErrStatus) || !strings.Contains(err.Error(), "403") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("error %v", err)
	}
}

// gzip is accepted; the cache holds the decompressed body.
func TestGzip(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			http.Error(w, "gzip only", 400)
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		zw.Write([]byte("payload:\n  - example.com\n"))
		zw.Close()
	}))
	defer srv.Close()
	f, _ := fetcher(t)
	r := resource(t, srv.URL)
	if _, err := f.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(r.CachePath); string(b) != "payload:\n  - example.com\n" {
		t.Fatalf("cache %q", b)
	}
}

// A download slower than ProgressAfter logs its progress, with the length
// when the server gives one.
func TestProgressLines(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "2097152")
		w.Write(bytes.Repeat([]byte("a"), 1<<20))
		w.(http.Flusher).Flush()
		<-release
		w.Write(bytes.Repeat([]byte("a"), 1<<20))
	}))
	defer srv.Close()
	var buf syncBuffer
	f, _ := fetcher(t)
	f.Log = slog.New(slog.NewTextHandler(&buf, nil))
	f.ProgressAfter, f.ProgressEvery = 50*time.Millisecond, 50*time.Millisecond
	go func() {
		for !strings.Contains(buf.String(), "1.0 MiB of 2.0 MiB") {
			time.Sleep(10 * time.Millisecond)
		}
		close(release)
	}()
	if _, err := f.Fetch(context.Background(), resource(t, srv.URL)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "downloading provider sub: 1.0 MiB of 2.0 MiB") {
		t.Fatalf("log:\n%s", buf.String())
	}
}

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

// A copy put at the cache path by hand has no meta: its age is its file's,
// and no validator is sent.
func TestReadMetaOfAHandPlacedCopy(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.txt")
	if _, ok := ReadMeta(p); ok {
		t.Fatal("a missing copy has a meta")
	}
	os.WriteFile(p, []byte("x"), 0o600)
	old := time.Now().Add(-48 * time.Hour)
	os.Chtimes(p, old, old)
	m, ok := ReadMeta(p)
	if !ok || m.ETag != "" || m.SHA256 != "" || !m.FetchedAt.Equal(old) {
		t.Fatalf("meta %+v %v", m, ok)
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://u:p@sub.example/api/v1/client?token=abc": "https://sub.example/api/v1/client?…",
		"http://sub.example/x":                            "http://sub.example/x",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// An https download verifies the server (here against the test server's
// own root) and leaves no connection behind (goleak checks).
func TestHTTPS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(r.Proto))
	}))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	f, _ := fetcher(t)
	r := resource(t, srv.URL)
	if _, err := f.Fetch(context.Background(), r); err == nil {
		t.Fatal("a server the system roots do not know was accepted")
	}
	f.TLS = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	if _, err := f.Fetch(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(r.CachePath); !strings.HasPrefix(string(b), "HTTP/") {
		t.Fatalf("cache %q", b)
	}
}
