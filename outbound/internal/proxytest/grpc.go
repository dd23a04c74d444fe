package proxytest

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/h2test"
	"switchyard/outbound"
)

// GRPCServer is a loopback gRPC server over HTTP/2: over TLS (ALPN h2), or
// over cleartext with prior knowledge, as the transport speaks it without a
// tls table. Each call is
// a gun stream: its messages' bytes, both ways, are handed to handle as a
// net.Conn, so a proxy server written for TCP serves over gRPC unchanged.
type GRPCServer struct {
	Addr string // host:port

	accepted atomic.Int32
	ended    atomic.Int32
	calls    sync.WaitGroup
}

// ServeGRPC starts a GRPCServer running handle on every call until the test
// ends, over TLS with cfg (nil: cleartext); cleanup closes every connection
// and waits for the handlers.
func ServeGRPC(t testing.TB, cfg *tls.Config, handle func(net.Conn)) *GRPCServer {
	t.Helper()
	s := &GRPCServer{}
	t.Cleanup(s.calls.Wait) // after the connections are closed, below
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		cfg = cfg.Clone()
		cfg.NextProtos = []string{"h2"}
		ln = tls.NewListener(ln, cfg)
	}
	s.Addr = Serve(t, ln, func(c net.Conn) {
		s.accepted.Add(1)
		defer s.ended.Add(1)
		if tc, ok := c.(*tls.Conn); ok && tc.Handshake() != nil {
			return // HTTP/2 reads the TLS version before anything else
		}
		h2test.ServeConn(c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.calls.Add(1)
			defer s.calls.Done()
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			g := &gunConn{body: r.Body, w: w}
			handle(g)
			g.Close()
		}))
	})
	return s
}

// Connections is how many connections the server accepted.
func (s *GRPCServer) Connections() int { return int(s.accepted.Load()) }

// Ended is how many of them ended.
func (s *GRPCServer) Ended() int { return int(s.ended.Load()) }

// gunConn is one call seen from the server: each Read returns bytes of the
// request's messages, each Write is one response message.
type gunConn struct {
	body io.Reader
	rest []byte // of the message read last

	wmu    sync.Mutex
	w      http.ResponseWriter
	closed atomic.Bool
}

func (g *gunConn) Read(p []byte) (int, error) {
	for len(g.rest) == 0 {
		msg, err := readGun(g.body)
		if err != nil {
			return 0, err
		}
		g.rest = msg
	}
	n := copy(p, g.rest)
	g.rest = g.rest[n:]
	return n, nil
}

// readGun reads one gRPC message and returns its data field.
func readGun(r io.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(r, msg); err != nil {
		return nil, err
	}
	if len(msg) == 0 {
		return nil, nil
	}
	if msg[0] != 0x0a { // field 1, length-delimited
		return nil, errors.New("gun message without its data field")
	}
	n, k := binary.Uvarint(msg[1:])
	if k <= 0 || uint64(len(msg)-1-k) < n {
		return nil, errors.New("gun message with a bad length")
	}
	return msg[1+k : 1+k+int(n)], nil
}

func (g *gunConn) Write(p []byte) (int, error) {
	if g.closed.Load() {
		return 0, net.ErrClosed
	}
	field := binary.AppendUvarint([]byte{0x0a}, uint64(len(p)))
	msg := make([]byte, 5, 5+len(field)+len(p))
	binary.BigEndian.PutUint32(msg[1:], uint32(len(field)+len(p)))
	msg = append(append(msg, field...), p...)
	g.wmu.Lock()
	defer g.wmu.Unlock()
	if _, err := g.w.Write(msg); err != nil {
		return 0, err
	}
	g.w.(http.Flusher).Flush()
	return len(p), nil
}

// Close stops writes; the call ends when the handler returns.
func (g *gunConn) Close() error {
	g.closed.Store(true)
	return nil
}

func (g *gunConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (g *gunConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (g *gunConn) SetDeadline(time.Time) error      { return os.ErrNoDeadline }
func (g *gunConn) SetReadDeadline(time.Time) error  { return os.ErrNoDeadline }
func (g *gunConn) SetWriteDeadline(time.Time) error { return os.ErrNoDeadline }

var _ net.Conn = (*gunConn)(nil)

// PurgeDrains checks an outbound over srv's gRPC transport (o must
// implement outbound.Purger): after Purge the next stream opens a new
// HTTP/2 connection, a stream open on the old one keeps carrying bytes
// until it closes, and the old connection then ends. Purges racing dials
// break no dial. srv's handler must echo what a stream to dst sends.
func PurgeDrains(t *testing.T, o outbound.Outbound, srv *GRPCServer, dst string) {
	t.Helper()
	p, ok := o.(outbound.Purger)
	if !ok {
		t.Fatalf("%T does not implement outbound.Purger", o)
	}
	dial := func() net.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := o.DialStream(ctx, TCPFlow(dst))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	old := dial()
	defer old.Close()
	Echoes(t, old, []byte("before the purge"))
	p.Purge()
	fresh := dial()
	defer fresh.Close()
	Echoes(t, fresh, []byte("after the purge"))
	if n := srv.Connections(); n != 2 {
		t.Fatalf("%d connections after a purge, want 2", n)
	}
	Echoes(t, old, []byte("still on the purged connection"))
	if n := srv.Ended(); n != 0 {
		t.Fatalf("%d connections ended while each carried a stream", n)
	}
	old.Close()
	waitUntil("the purged connection to end", func() bool { return srv.Ended() == 1 })
	Echoes(t, fresh, []byte("the new connection goes on"))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
				p.Purge()
			}
		}
	}()
	errs := make(chan error, 4)
	var dials sync.WaitGroup
	for range 4 {
		dials.Add(1)
		go func() {
			defer dials.Done()
			for range 5 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				c, err := o.DialStream(ctx, TCPFlow(dst))
				cancel()
				if err == nil {
					err = echo(c, []byte("racing a purge"))
					c.Close()
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	dials.Wait()
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	fresh.Close()
	p.Purge()
	waitUntil("every connection to end", func() bool { return srv.Ended() == srv.Connections() })
}

// echo is Echoes returning its error, for another goroutine than the
// test's.
func echo(c net.Conn, msg []byte) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(msg); err != nil {
		return err
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if string(got) != string(msg) {
		return errors.New("echo differs: " + string(got))
	}
	return nil
}
