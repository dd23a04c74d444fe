package connpool

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/testcert"
)

// server is a TCP server that keeps what it accepts; echo makes each
// connection echo what it reads.
type server struct {
	ln      net.Listener
	tls     *tls.Config // nil: bare
	accepts atomic.Int32
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
	born  map[string]time.Time // accept times by the client's address
	eofs  atomic.Int32         // connections the client closed
	idle  time.Duration        // > 0: a connection that sent nothing this long is closed
	shut  atomic.Int32         // connections closed for idling
}

func newServer(t *testing.T, withTLS bool) *server { return newIdleServer(t, withTLS, 0) }

// newIdleServer is a server that closes a connection which sent nothing
// within idle of its accept (a handshake policy); 0: never.
func newIdleServer(t *testing.T, withTLS bool, idle time.Duration) *server {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, idle: idle, born: map[string]time.Time{}}
	if withTLS {
		c := testcert.New(t, "pool.test")
		s.tls = &tls.Config{Certificates: []tls.Certificate{c.Certificate}}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			at := time.Now()
			if s.tls != nil {
				c = tls.Server(c, s.tls)
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.born[c.RemoteAddr().String()] = at
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				if s.idle > 0 {
					c.SetReadDeadline(at.Add(s.idle))
					var b [1]byte
					if _, err := c.Read(b[:]); err != nil {
						switch {
						case errors.Is(err, os.ErrDeadlineExceeded):
							s.shut.Add(1)
						case errors.Is(err, io.EOF):
							s.eofs.Add(1)
						}
						c.Close()
						return
					}
					c.SetReadDeadline(time.Time{})
					if _, err := c.Write(b[:]); err != nil {
						return
					}
				}
				if _, err := io.Copy(c, c); err == nil {
					s.eofs.Add(1)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

// age is how long ago the server accepted c, a client connection.
func (s *server) age(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	var at time.Time
	waitFor(t, "the server to accept "+c.LocalAddr().String(), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		var ok bool
		at, ok = s.born[c.LocalAddr().String()]
		return ok
	})
	return time.Since(at)
}

// open is how many accepted connections neither side has closed.
func (s *server) open() int { return int(s.accepts.Load() - s.eofs.Load() - s.shut.Load()) }

// conn is the server's side of the i-th accepted connection.
func (s *server) conn(t *testing.T, i int) net.Conn {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		s.mu.Lock()
		if len(s.conns) > i {
			c := s.conns[i]
			s.mu.Unlock()
			return c
		}
		s.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("the server accepted no connection %d", i)
		}
		time.Sleep(time.Millisecond)
	}
}

// dial is the pool's Dial toward s: TCP, then TLS when s has it.
func (s *server) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp4", s.ln.Addr().String())
	if err != nil || s.tls == nil {
		return c, err
	}
	roots := x509.NewCertPool()
	leaf, _ := x509.ParseCertificate(s.tls.Certificates[0].Certificate[0])
	roots.AddCert(leaf)
	tc := tls.Client(c, &tls.Config{ServerName: "pool.test", RootCAs: roots})
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

// clock is a manual clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_000_000, 0)} }

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// roundTrip writes a line on c and reads its echo.
func roundTrip(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q, %v", buf, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
