package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// xhServer is an XHTTP server of the tests' own, after Xray's: it checks
// every request's padding, echoes stream-one's body, and puts a session's
// packet-up POSTs back in order by their sequence numbers (a stream-up
// POST is the session's whole upload), echoing the upload on the
// session's GET.
type xhServer struct {
	addr    netip.AddrPort
	padLo   int
	padHi   int
	accepts atomic.Int32
	// delay holds a packet-up POST back before it is queued, so that POSTs
	// overtake one another.
	delay func(seq uint64) time.Duration
	// answer, when set, is asked before a download (the GET, stream-one's
	// POST) is answered: it may hold the answer back, and its status
	// replaces 200 when not 0.
	answer func(r *http.Request) int

	srv      *http.Server
	tlsCfg   *tls.Config
	mu       sync.Mutex
	at       []string // every request, as "METHOD port"
	bad      []string // what the server refused, and why
	paddings []int
	streamed []string // the Content-Type of every streamed POST (stream-one, stream-up)
	posts    []xhPost // packet-up POSTs, in the order they were queued
	sessions map[string]*xhSession
}

type xhPost struct {
	sess string
	seq  uint64
	size int
	at   time.Time // when it arrived
}

type xhSession struct {
	mu      sync.Mutex
	pending map[uint64][]byte
	next    uint64
	out     chan []byte
}

func (s *xhSession) push(seq uint64, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[seq] = b
	for {
		p, ok := s.pending[s.next]
		if !ok {
			return
		}
		delete(s.pending, s.next)
		s.next++
		s.out <- p
	}
}

func newXHServer(t *testing.T, cfg *tls.Config) *xhServer {
	t.Helper()
	s := &xhServer{padLo: 100, padHi: 1000, sessions: map[string]*xhSession{}}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(true)
	var handlers sync.WaitGroup
	srv := &http.Server{
		Protocols: protos,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handlers.Add(1)
			defer handlers.Done()
			s.serve(w, r)
		}),
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.accepts.Add(1)
			}
		},
	}
	if cfg != nil {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	s.srv, s.tlsCfg = srv, cfg
	t.Cleanup(func() { handlers.Wait() })
	s.addr = s.serveOn(t, ln)
	return s
}

// serveOn serves s on ln (under its TLS, when it has one) until the test
// ends.
func (s *xhServer) serveOn(t *testing.T, ln net.Listener) netip.AddrPort {
	var l net.Listener = ln
	if s.tlsCfg != nil {
		l = tls.NewListener(ln, s.tlsCfg)
	}
	served := make(chan struct{})
	go func() { s.srv.Serve(l); close(served) }()
	t.Cleanup(func() {
		s.srv.Close()
		<-served
	})
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// alsoOn serves s on a second port too, which it returns: the same
// sessions, as one Xray inbound reached by two paths.
func (s *xhServer) alsoOn(t *testing.T) netip.AddrPort {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return s.serveOn(t, ln)
}

// alsoH3 serves s over HTTP/3 on a UDP port, which it returns (the
// server must have been made with a TLS config).
func (s *xhServer) alsoH3(t *testing.T) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	h3 := &http3.Server{Handler: s.srv.Handler, TLSConfig: http3.ConfigureTLSConfig(s.tlsCfg.Clone()),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			s.accepts.Add(1)
			return ctx
		}}
	served := make(chan struct{})
	go func() { h3.Serve(pc); close(served) }()
	t.Cleanup(func() {
		h3.Close()
		pc.Close()
		<-served
	})
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// requestsAt lists the requests that came to port, by method.
func (s *xhServer) requestsAt(port uint16) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]int{}
	for _, a := range s.at {
		method, p, _ := strings.Cut(a, " ")
		if p == strconv.Itoa(int(port)) {
			m[method]++
		}
	}
	return m
}

func (s *xhServer) refuse(w http.ResponseWriter, why string) {
	s.mu.Lock()
	s.bad = append(s.bad, why)
	s.mu.Unlock()
	w.WriteHeader(http.StatusBadRequest)
}

func (s *xhServer) session(id string) *xhSession {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.sessions[id]
	if ss == nil {
		ss = &xhSession{pending: map[uint64][]byte{}, out: make(chan []byte, 4096)}
		s.sessions[id] = ss
	}
	return ss
}

func (s *xhServer) serve(w http.ResponseWriter, r *http.Request) {
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok {
		s.mu.Lock()
		s.at = append(s.at, r.Method+" "+strconv.Itoa(a.Port))
		s.mu.Unlock()
	}
	ref, err := url.Parse(r.Header.Get("Referer"))
	if err != nil {
		s.refuse(w, "a bad Referer")
		return
	}
	pad := ref.Query().Get("x_padding")
	if len(pad) < s.padLo || len(pad) > s.padHi || strings.Trim(pad, "X") != "" {
		s.refuse(w, "padding of "+strconv.Itoa(len(pad)))
		return
	}
	s.mu.Lock()
	s.paddings = append(s.paddings, len(pad))
	s.mu.Unlock()
	rest, ok := strings.CutPrefix(r.URL.Path, "/xh/")
	if !ok {
		s.refuse(w, "path "+r.URL.Path)
		return
	}
	var parts []string
	if rest != "" {
		parts = strings.Split(rest, "/")
	}
	if r.Method == http.MethodPost && len(parts) <= 1 {
		s.mu.Lock()
		s.streamed = append(s.streamed, r.Header.Get("Content-Type"))
		s.mu.Unlock()
	}
	flush := func() { http.NewResponseController(w).Flush() }
	download := r.Method == http.MethodGet && len(parts) == 1 || r.Method == http.MethodPost && len(parts) == 0
	if download && s.answer != nil {
		if code := s.answer(r); code != 0 {
			w.WriteHeader(code)
			return
		}
	}
	switch {
	case r.Method == http.MethodPost && len(parts) == 0: // stream-one
		w.WriteHeader(http.StatusOK)
		flush()
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n])
				flush()
			}
			if err != nil {
				return
			}
		}
	case r.Method == http.MethodGet && len(parts) == 1: // the download
		ss := s.session(parts[0])
		w.WriteHeader(http.StatusOK)
		flush()
		for {
			select {
			case b := <-ss.out:
				if _, err := w.Write(b); err != nil {
					return
				}
				flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.Method == http.MethodPost && len(parts) == 1: // stream-up
		ss := s.session(parts[0])
		w.WriteHeader(http.StatusOK)
		flush()
		var seq uint64
		buf := make([]byte, 32<<10)
		for {
			n, err := r.Body.Read(buf)
			if n > 0 {
				ss.push(seq, bytes.Clone(buf[:n]))
				seq++
			}
			if err != nil {
				return
			}
		}
	case r.Method == http.MethodPost && len(parts) == 2: // packet-up
		seq, err := strconv.ParseUint(parts[1], 10, 64)
		if err != nil {
			s.refuse(w, "seq "+parts[1])
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		at := time.Now()
		if s.delay != nil {
			time.Sleep(s.delay(seq))
		}
		s.mu.Lock()
		s.posts = append(s.posts, xhPost{sess: parts[0], seq: seq, size: len(body), at: at})
		s.mu.Unlock()
		s.session(parts[0]).push(seq, body)
		w.WriteHeader(http.StatusOK)
	default:
		s.refuse(w, r.Method+" "+r.URL.Path)
	}
}

func (s *xhServer) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		t.Fatalf("the server refused: %v", s.bad)
	}
}
