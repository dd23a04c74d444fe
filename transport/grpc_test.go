package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/h2test"
	"switchyard/internal/slot"
	"switchyard/netx"
	"switchyard/spec"
)

// grpcServer is an HTTP/2 server over TLS (net/http's server, on each
// connection it accepted) with a handler per test.
type grpcServer struct {
	addr    netip.AddrPort
	accepts atomic.Int32
	ended   atomic.Int32 // connections whose HTTP/2 serving ended
	mu      sync.Mutex
	conns   []net.Conn
	reqs    []*http.Request
}

func newGRPCServer(t *testing.T, p *pki, protos []string, h func(w http.ResponseWriter, r *http.Request)) *grpcServer {
	t.Helper()
	s := &grpcServer{}
	cfg := p.serverConfig(tls.VersionTLS12, tls.VersionTLS13)
	cfg.NextProtos = protos
	s.addr = accept(t, func(c net.Conn) {
		s.accepts.Add(1)
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		defer s.ended.Add(1)
		tc := tls.Server(c, cfg)
		if tc.Handshake() != nil {
			return
		}
		h2test.ServeConn(tc, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.reqs = append(s.reqs, r)
			s.mu.Unlock()
			h(w, r)
		}))
	})
	return s
}

// killAll closes every connection the server accepted.
func (s *grpcServer) killAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.conns {
		c.Close()
	}
}

func (s *grpcServer) lastRequest(t *testing.T) *http.Request {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.reqs) == 0 {
		t.Fatal("no request")
	}
	return s.reqs[len(s.reqs)-1]
}

// readMessage reads one gRPC message of the request body.
func readMessage(r io.Reader) ([]byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint32(h[1:]))
	_, err := io.ReadFull(r, msg)
	return msg, err
}

// dataFields are the bytes fields numbered 1 of a protobuf message.
func dataFields(msg []byte) ([][]byte, error) {
	var out [][]byte
	for len(msg) > 0 {
		tag, n := binary.Uvarint(msg)
		if n <= 0 || tag != 0x0A {
			return nil, errors.New("not a data field")
		}
		l, m := binary.Uvarint(msg[n:])
		if m <= 0 || uint64(len(msg)-n-m) < l {
			return nil, errors.New("bad length")
		}
		out = append(out, msg[n+m:n+m+int(l)])
		msg = msg[n+m+int(l):]
	}
	return out, nil
}

// message is a gRPC message holding one data field per part.
func message(parts ...[]byte) []byte {
	var body []byte
	for _, p := range parts {
		body = append(body, 0x0A)
		body = binary.AppendUvarint(body, uint64(len(p)))
		body = append(body, p...)
	}
	out := []byte{0}
	out = binary.BigEndian.AppendUint32(out, uint32(len(body)))
	return append(out, body...)
}

// grpcEcho answers each message's data fields in one message, or split in
// one field per byte half when multi; at the end of the body it ends the
// call with status.
func grpcEcho(multi bool, status string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", status)
		w.Header().Set(http.TrailerPrefix+"Grpc-Message", "boom%20here")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		for {
			msg, err := readMessage(r.Body)
			if err != nil {
				return
			}
			fields, err := dataFields(msg)
			if err != nil {
				return
			}
			data := bytes.Join(fields, nil)
			out := message(data)
			if multi && len(data) > 1 {
				out = message(data[:len(data)/2], nil, data[len(data)/2:])
			}
			if _, err := w.Write(out); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}
}

func grpcOutbound(p *pki, server netip.AddrPort, tr spec.Transport) spec.Outbound {
	tr.Type = "grpc"
	return spec.Outbound{Server: server.String(), Transport: tr, TLS: &spec.TLS{ServerName: serverName, CAFile: p.caFile}}
}

func newDialer(t *testing.T, o spec.Outbound) *Dialer {
	t.Helper()
	d, err := New(o, deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func dialCtx(t *testing.T, d *Dialer) net.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGRPCEcho(t *testing.T) {
	p := newPKI(t)
	for _, multi := range []bool{false, true} {
		mode := map[bool]string{false: "gun", true: "multi"}[multi]
		t.Run(mode, func(t *testing.T) {
			srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(multi, "0"))
			d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{ServiceName: "my svc", Mode: mode}))
			c := dialCtx(t, d)
			defer c.Close()
			echoRoundTrip(t, c, 1, 100, hunkData, hunkData+1, 300_000)
			r := srv.lastRequest(t)
			wantPath := "/my%20svc/Tun"
			if multi {
				wantPath = "/my%20svc/TunMulti"
			}
			if r.Method != "POST" || r.RequestURI != wantPath || r.Host != serverName || r.Header.Get("Content-Type") != "application/grpc" ||
				r.Header.Get("Te") != "trailers" || r.Header.Get("User-Agent") != DefaultUserAgent {
				t.Fatalf("request %s %s, authority %q, headers %v", r.Method, r.RequestURI, r.Host, r.Header)
			}
		})
	}
}

// Streams of one outbound share one HTTP/2 connection; a dead one is
// replaced on the next dial.
func TestGRPCSharesAndReplacesTheConnection(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{ServiceName: "s", Authority: "auth.test"}))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialCtx(t, d)
			defer c.Close()
			echoRoundTrip(t, c, 10, 70_000)
		}()
	}
	wg.Wait()
	c := dialCtx(t, d) // after every stream closed: the idle connection is reused
	echoRoundTrip(t, c, 5)
	c.Close()
	if n := srv.accepts.Load(); n != 1 {
		t.Fatalf("%d connections for 9 streams", n)
	}
	if got := srv.lastRequest(t).Host; got != "auth.test" {
		t.Fatalf("authority %q", got)
	}
	live := dialCtx(t, d)
	srv.killAll()
	live.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := live.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("a stream on a dead connection: %v", err)
	}
	live.Close()
	c = dialCtx(t, d)
	echoRoundTrip(t, c, 5)
	c.Close()
	if n := srv.accepts.Load(); n != 2 {
		t.Fatalf("%d connections after one died, want 2", n)
	}
}

// CloseWrite ends the request body; the server's answer and its OK status
// then end the response with EOF.
func TestGRPCCloseWrite(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.Header().Set(http.TrailerPrefix+"Grpc-Status", "0")
		body, _ := io.ReadAll(r.Body) // until the client's END_STREAM
		w.Write(message([]byte("got "), []byte(string(rune('0'+len(body)%10)))))
	})
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	c := dialCtx(t, d)
	defer c.Close()
	c.Write([]byte("abc"))
	if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("late")); !errors.Is(err, errStreamWriteClosed) {
		t.Fatalf("write after CloseWrite: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(got), "got ") {
		t.Fatalf("read %q, %v", got, err)
	}
}

// A refused call or a failed status fails the stream with the server's
// words.
func TestGRPCServerRefusals(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name string
		h    func(w http.ResponseWriter, r *http.Request)
		want string
	}{
		{"not found", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, `answered HTTP "404"`},
		{"not grpc", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>"))
		}, `content-type "text/html"`},
		{"status", grpcEcho(false, "13"), "status 13: boom here"},
		{"trailers only", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Grpc-Status", "12")
			w.Header().Set("Grpc-Message", "unimplemented")
			w.WriteHeader(http.StatusOK)
		}, "status 12: unimplemented"},
		{"compressed", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/grpc")
			w.Write([]byte{1, 0, 0, 0, 0})
			w.(http.Flusher).Flush()
			io.Copy(io.Discard, r.Body)
		}, errHunkCompressed.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newGRPCServer(t, p, []string{"h2"}, tc.h)
			d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
			c := dialCtx(t, d)
			defer c.Close()
			c.Write([]byte("x"))
			c.(interface{ CloseWrite() error }).CloseWrite()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, err := io.ReadAll(c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// Bulk both ways at once runs through the flow-control windows.
func TestGRPCBulkBothWays(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	c := dialCtx(t, d)
	defer c.Close()
	echoRoundTrip(t, c, 8<<20)
}

// A read deadline fires without losing the stream; a late message is read
// once it is cleared.
func TestGRPCReadDeadline(t *testing.T) {
	p := newPKI(t)
	release := make(chan struct{})
	srv := newGRPCServer(t, p, []string{"h2"}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/grpc")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
		w.Write(message([]byte("late")))
		w.(http.Flusher).Flush()
		io.Copy(io.Discard, r.Body)
	})
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	c := dialCtx(t, d)
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	buf := make([]byte, 10)
	if _, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("error %v", err)
	}
	c.SetReadDeadline(time.Time{})
	close(release)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "late" {
		t.Fatalf("read %q, %v", buf[:n], err)
	}
}

// gRPC runs on HTTP/2 only: a server that does not agree to h2 (here, one
// without ALPN) fails the dial.
func TestGRPCNeedsHTTP2(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, nil, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := d.Dial(ctx); err == nil || !strings.Contains(err.Error(), "did not agree to HTTP/2") {
		t.Fatalf("error %v", err)
	}
}

// Close ends the shared connection with its streams and refuses later
// dials.
func TestDialerClose(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{}))
	c := dialCtx(t, d)
	defer c.Close()
	d.Close()
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after the dialer closed: %v", err)
	}
	if _, err := d.Dial(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("dial after Close: %v", err)
	}
}

func TestGRPCPath(t *testing.T) {
	for _, tc := range []struct {
		service string
		multi   bool
		want    string
	}{
		{"", false, "//Tun"},
		{"svc", false, "/svc/Tun"},
		{"svc", true, "/svc/TunMulti"},
		{"a/b", false, "/a%2Fb/Tun"},
		{"/custom/path/Name", false, "/custom/path/Name"},
		{"/custom/Name|Multi", true, "/custom/Name"},
	} {
		if got := grpcPath(tc.service, tc.multi); got != tc.want {
			t.Errorf("grpcPath(%q, %v) = %q, want %q", tc.service, tc.multi, got, tc.want)
		}
	}
}

// Without a tls table gRPC runs on cleartext HTTP/2 with prior knowledge
// (h2c): the connection preface first, no HTTP/1.1 upgrade; the calls
// share one connection.
func TestGRPCWithoutTLS(t *testing.T) {
	var (
		mu      sync.Mutex
		reqs    []*http.Request
		accepts atomic.Int32
	)
	addr := accept(t, func(c net.Conn) {
		accepts.Add(1)
		h2test.ServeConn(c, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			reqs = append(reqs, r)
			mu.Unlock()
			grpcEcho(false, "0")(w, r)
		}))
	})
	d := newDialer(t, spec.Outbound{Server: addr.String(), Transport: spec.Transport{Type: "grpc", ServiceName: "svc"}})
	for i := range 2 { // the second call shares the connection
		c := dialCtx(t, d)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		want := []byte("over h2c")
		if _, err := c.Write(want); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(want))
		if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("call %d: echo %q, %v", i, got, err)
		}
		c.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 2 || accepts.Load() != 1 {
		t.Fatalf("%d calls on %d connections", len(reqs), accepts.Load())
	}
	for _, r := range reqs {
		if r.Proto != "HTTP/2.0" || r.TLS != nil || r.URL.Path != "/svc/Tun" || r.Host != addr.Addr().String() {
			t.Fatalf("call %s %s host %q tls %v", r.Proto, r.URL.Path, r.Host, r.TLS != nil)
		}
	}
}

// A speculative dial (a cold preparation's candidate) with no connection up
// connects one of its own, publishes nothing and closes it with its stream;
// a committed one is put in service and the next dials reuse it; with a
// connection up, a speculative dial shares it and connects nothing.
func TestGRPCSpeculativeDialPublishesOnlyOnCommit(t *testing.T) {
	p := newPKI(t)
	srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
	d := newDialer(t, grpcOutbound(p, srv.addr, spec.Transport{ServiceName: "s"}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sctx := netx.WithSpeculative(ctx)
	state := func() slot.State { st, _ := d.SlotState(); return st }
	waitState := func(what string, ok func(slot.State) bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(state()); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: %+v", what, state())
			}
		}
	}

	loser, err := d.Dial(sctx)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, loser, 3)
	if st := state(); st.Phase == slot.Up || st.Detached != 1 || srv.accepts.Load() != 1 {
		t.Fatalf("a speculative dial published its connection: %+v, %d accepted", st, srv.accepts.Load())
	}
	loser.Close()
	waitState("the loser's connection closed with its stream", func(st slot.State) bool { return st.Detached == 0 && st.Phase != slot.Up })

	winner, err := d.Dial(sctx)
	if err != nil {
		t.Fatal(err)
	}
	netx.Commit(ctx, winner)
	waitState("the winner's connection in service", func(st slot.State) bool { return st.Phase == slot.Up && st.Detached == 0 })
	next := dialCtx(t, d)
	echoRoundTrip(t, next, 3)
	shared, err := d.Dial(sctx)
	if err != nil {
		t.Fatal(err)
	}
	echoRoundTrip(t, shared, 3)
	if n := srv.accepts.Load(); n != 2 || state().Detached != 0 {
		t.Fatalf("%d connections (the loser's and the winner's), detached %d", n, state().Detached)
	}
	for _, c := range []net.Conn{winner, next, shared} {
		c.Close()
	}
}
