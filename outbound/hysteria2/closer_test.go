package hysteria2

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apernet/quic-go"
	"github.com/apernet/quic-go/http3"
)

// closerServer authenticates every Hysteria 2 client (announcing UDP) and
// then closes its connection: at once when closeAfter is set, else when
// told with closeAll. It is the server at its user limit, or one that
// restarts.
type closerServer struct {
	addr       netip.AddrPort
	cert       testCert
	sessions   atomic.Int32
	closeAfter time.Duration

	mu    sync.Mutex
	conns []*quic.Conn
	wg    sync.WaitGroup
}

func startCloser(t *testing.T, closeAfter time.Duration) *closerServer {
	t.Helper()
	return startCloserWith(t, closeAfter, true)
}

// startCloserWith starts a closerServer whose QUIC layer offers datagrams
// or not.
func startCloserWith(t *testing.T, closeAfter time.Duration, datagrams bool) *closerServer {
	t.Helper()
	s := &closerServer{cert: newTestCert(t), closeAfter: closeAfter}
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s.addr = uc.LocalAddr().(*net.UDPAddr).AddrPort()
	tr := &quic.Transport{Conn: uc}
	tlsConf := http3.ConfigureTLSConfig(&tls.Config{Certificates: []tls.Certificate{s.cert.cert}})
	ln, err := tr.Listen(tlsConf, &quic.Config{EnableDatagrams: datagrams})
	if err != nil {
		t.Fatal(err)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() { defer s.wg.Done(); s.serve(c) }()
		}
	}()
	t.Cleanup(func() {
		s.closeAll()
		ln.Close()
		tr.Close()
		uc.Close()
		s.wg.Wait()
	})
	return s
}

func (s *closerServer) serve(c *quic.Conn) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.sessions.Add(1)
		w.Header().Set("Hysteria-UDP", "true")
		w.Header().Set("Hysteria-CC-RX", "0")
		w.WriteHeader(233)
		w.(http.Flusher).Flush()
		if s.closeAfter > 0 {
			// Long enough for the answer to leave first.
			time.Sleep(s.closeAfter)
			c.CloseWithError(0x100, "")
		}
	})
	srv := &http3.Server{Handler: h}
	srv.ServeQUICConn(c)
}

func (s *closerServer) closeAll() {
	s.mu.Lock()
	conns := s.conns
	s.conns = nil
	s.mu.Unlock()
	for _, c := range conns {
		c.CloseWithError(0x100, "")
	}
}
