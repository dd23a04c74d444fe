package probe

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// tlsServer is an httptest TLS server that records, per client connection
// (its remote address), the protocol and methods of its requests.
type tlsServer struct {
	*httptest.Server
	mu   sync.Mutex
	seen map[string][]string // remote address: "proto method" per request
}

func newTLSServer(t *testing.T, http2 bool, status int) *tlsServer {
	t.Helper()
	s := &tlsServer{seen: map[string][]string{}}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.seen[r.RemoteAddr] = append(s.seen[r.RemoteAddr], r.Proto+" "+r.Method)
		s.mu.Unlock()
		w.WriteHeader(status)
		if r.Method == http.MethodGet {
			w.Write([]byte("a body the probe does not read"))
		}
	}))
	s.EnableHTTP2 = http2
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func (s *tlsServer) roots() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	return pool
}

func (s *tlsServer) requests() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out [][]string
	for _, r := range s.seen {
		out = append(out, slices.Clone(r))
	}
	return out
}

func TestHTTPS(t *testing.T) {
	for _, tc := range []struct {
		name  string
		http2 bool
		proto string
	}{
		{"h2", true, "HTTP/2.0"},
		{"http/1.1 only", false, "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTLSServer(t, tc.http2, http.StatusNoContent)
			d := &testDialer{delay: 200 * time.Millisecond}
			p := New(d, Options{RootCAs: s.roots()})
			res, err := p.TCP(within(t, 10*time.Second), s.URL+"/generate_204?x=1", "GET")
			if err != nil {
				t.Fatal(err)
			}
			if res.RTT <= 0 || res.RTT >= 100*time.Millisecond {
				t.Fatalf("RTT %v; want the loopback round trip", res.RTT)
			}
			want := []string{tc.proto + " HEAD", tc.proto + " GET"}
			if got := s.requests(); len(got) != 1 || !slices.Equal(got[0], want) {
				t.Fatalf("server saw %v; want one connection with %v", got, want)
			}
		})
	}
}

func TestHTTPSStatus(t *testing.T) {
	for _, h2 := range []bool{true, false} {
		s := newTLSServer(t, h2, http.StatusNotFound)
		if _, err := New(&testDialer{}, Options{RootCAs: s.roots()}).TCP(within(t, 5*time.Second), s.URL, "HEAD"); err != nil {
			t.Errorf("h2 %v, 404: %v", h2, err)
		}
		s = newTLSServer(t, h2, http.StatusInternalServerError)
		_, err := New(&testDialer{}, Options{RootCAs: s.roots()}).TCP(within(t, 5*time.Second), s.URL, "HEAD")
		checkErr(t, err, &StatusError{Code: 500})
	}
}

// The server's certificate is verified: one no root vouches for fails,
// before any request.
func TestHTTPSUntrusted(t *testing.T) {
	s := newTLSServer(t, true, http.StatusNoContent)
	for name, roots := range map[string]*x509.CertPool{"system roots": nil, "other roots": x509.NewCertPool()} {
		_, err := New(&testDialer{}, Options{RootCAs: roots}).TCP(within(t, 5*time.Second), s.URL, "HEAD")
		var ve *tls.CertificateVerificationError
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v; want a certificate verification error", name, err)
		}
	}
	if got := s.requests(); len(got) != 0 {
		t.Fatalf("requests reached the server: %v", got)
	}
}
