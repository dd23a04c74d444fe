package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// A flow on an idle connection makes no connect, but its requests are its
// handshake: it takes the dial's admission permit, waiting for a full gate
// within its deadline, and counts as a pooled dial.
func TestXHTTPIdleConnectionTakesThePermit(t *testing.T) {
	s := newXHServer(t, nil)
	o := xhOutbound(s.addr, spec.Transport{Mode: "stream-up"}, nil)
	d := newDialer(t, o)
	adm := netx.NewAdmission(netx.NewGate(8), 1)

	e, ctx, cancel := netx.Begin(context.Background(), adm, 5*time.Second)
	first, err := d.Dial(ctx)
	e.End()
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	xhEcho(t, first, 1000, 1000)
	first.Close()

	holder, hctx, hcancel := netx.Begin(context.Background(), adm, time.Minute)
	if err := netx.Admit(hctx); err != nil {
		t.Fatal(err)
	}
	e, ctx, cancel = netx.Begin(context.Background(), adm, 200*time.Millisecond)
	_, err = d.Dial(ctx)
	e.End()
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || e.Phase() != netx.PhaseAdmission {
		t.Fatalf("a flow on an idle connection past a full gate: %v (phase %v)", err, e.Phase())
	}
	holder.End()
	hcancel()

	e, ctx, cancel = netx.Begin(context.Background(), adm, 5*time.Second)
	defer cancel()
	c, err := d.Dial(ctx)
	pooled := e.TakePooled()
	e.End()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	xhEcho(t, c, 1000, 1000)
	if !pooled {
		t.Error("a flow on an idle connection is not marked pooled")
	}
	if n := s.accepts.Load(); n != 1 {
		t.Fatalf("%d connections, want the one reused", n)
	}
}

// Warm opens a connection before any flow, which the first flow takes.
func TestXHTTPWarm(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one"}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if opened, err := d.Warm(ctx, false); err != nil || !opened {
		t.Fatalf("Warm: %v, %v", opened, err)
	}
	if w := d.Warmth(); w.Kind != WarmPool || w.Pooled != 1 {
		t.Fatalf("warmth %+v after Warm", w)
	}
	if opened, err := d.Warm(ctx, true); err != nil || opened {
		t.Fatalf("a second Warm with one connection idle: %v, %v", opened, err)
	}
	c := xhFlow(t, d)
	defer c.Close()
	xhEcho(t, c, 1000, 1000)
	if n := s.accepts.Load(); n != 1 {
		t.Fatalf("%d connections after Warm and a flow, want 1", n)
	}
	if w := d.Warmth(); w.Pooled != 0 {
		t.Fatal("the warm connection is still idle while the flow holds it")
	}
	d.Cool()
}

// Every socket of a flow, the packet-up upload connection over HTTP/1.1
// included, is opened under the socket policy.
func TestXHTTPSocketsUnderThePolicy(t *testing.T) {
	s := newXHServer(t, nil)
	var sockets atomic.Int32
	opts := deps(func(netx.SocketInfo) error { sockets.Add(1); return nil })
	d, err := New(xhOutbound(s.addr, spec.Transport{Mode: "packet-up", MinPostsInterval: time.Millisecond}, nil), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := dialCtx(t, d)
	xhEcho(t, c, 50_000, 5000)
	c.Close()
	if n, accepted := sockets.Load(), s.accepts.Load(); n != accepted || n != 2 {
		t.Fatalf("%d sockets under the policy, %d accepted by the server; want 2 of each (download and upload)", n, accepted)
	}
}

// An idle connection that broke meanwhile does not fail the next flow: the
// dial goes on to a fresh connection.
func TestXHTTPBrokenIdleConnection(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one"}, nil))
	c := xhFlow(t, d)
	xhEcho(t, c, 1000, 1000)
	c.Close()
	d.xhttp.mu.Lock()
	if len(d.xhttp.conns) != 1 {
		d.xhttp.mu.Unlock()
		t.Fatalf("%d idle connections after a flow, want 1", len(d.xhttp.conns))
	}
	d.xhttp.conns[0].raw.(net.Conn).Close()
	d.xhttp.mu.Unlock()
	c = xhFlow(t, d)
	defer c.Close()
	xhEcho(t, c, 1000, 1000)
	if n := s.accepts.Load(); n != 2 {
		t.Fatalf("%d connections, want 2 (the broken one and a fresh one)", n)
	}
}

// establish dials d within a fresh establishment of the given deadline.
func establish(t *testing.T, d *Dialer, within time.Duration) (net.Conn, error) {
	t.Helper()
	e, ctx, cancel := netx.Begin(context.Background(), netx.NewAdmission(netx.NewGate(8), 1), within)
	defer cancel()
	defer e.End()
	return d.Dial(ctx)
}

// On a connection whose server answered a flow before, a flow's dial
// returns once its download's request is written: its upload goes out
// before the answer comes. A refusal or silence from the server then fails
// the flow's reads, the silence within the establishment's deadline; on a
// fresh connection the dial still waits for the answer and fails itself.
// (HTTP/2 over TLS: over HTTP/1.1 every flow has connections of its own.)
func TestXHTTPAnsweredConnectionSendsBeforeTheAnswer(t *testing.T) {
	p := newPKI(t)
	tt := &spec.TLS{ServerName: serverName, CAFile: p.caFile}
	for _, mode := range []string{"stream-one", "stream-up", "packet-up"} {
		t.Run(mode, func(t *testing.T) {
			s := newXHServer(t, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
			var hold atomic.Pointer[chan struct{}]
			var code atomic.Int32
			s.answer = func(r *http.Request) int {
				if h := hold.Load(); h != nil {
					select {
					case <-*h:
					case <-r.Context().Done():
					}
				}
				return int(code.Load())
			}
			d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: mode}, tt))

			// A fresh connection: the refusal fails the dial.
			code.Store(http.StatusNotFound)
			if c, err := establish(t, d, 5*time.Second); err == nil || !strings.Contains(err.Error(), "404") {
				if c != nil {
					c.Close()
				}
				t.Fatalf("a refused flow on a fresh connection dialled: %v", err)
			}
			code.Store(0)
			first, err := establish(t, d, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			xhEcho(t, first, 1000, 1000)
			first.Close()

			release := make(chan struct{})
			hold.Store(&release)
			type dialResult struct {
				c   net.Conn
				err error
			}
			dialled := make(chan dialResult, 1)
			go func() {
				c, err := establish(t, d, 5*time.Second)
				dialled <- dialResult{c, err}
			}()
			var c net.Conn
			select {
			case r := <-dialled:
				if r.err != nil {
					close(release)
					t.Fatal(r.err)
				}
				c = r.c
			case <-time.After(3 * time.Second):
				close(release)
				if r := <-dialled; r.c != nil {
					r.c.Close()
				}
				t.Fatal("the dial waited for the answer on a connection already answered")
			}
			if _, err := c.Write([]byte("sent before the answer")); err != nil {
				t.Fatal(err)
			}
			close(release)
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			got := make([]byte, len("sent before the answer"))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != "sent before the answer" {
				t.Fatalf("read %q, %v", got, err)
			}
			c.Close()
			if n := s.accepts.Load(); n != 2 {
				t.Fatalf("%d connections, want the refused one and the one reused", n)
			}

			// A refusal on the answered connection fails the flow's reads
			// (or the dial, when it came before the dial returned).
			code.Store(http.StatusNotFound)
			c, err = establish(t, d, 5*time.Second)
			if err == nil {
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err = c.Read(got)
				c.Close()
			}
			if err == nil || !strings.Contains(err.Error(), "404") {
				t.Fatalf("a refused download: %v", err)
			}
			code.Store(0)

			// Silence fails them at the establishment's deadline, on an
			// answered connection (a flow the server answers first: a
			// refusal the dial saw closed the connection).
			c, err = establish(t, d, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			xhEcho(t, c, 100, 100)
			c.Close()
			silent := make(chan struct{})
			defer close(silent)
			hold.Store(&silent)
			c, err = establish(t, d, 300*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(got); err == nil || !strings.Contains(err.Error(), "within the establishment deadline") {
				t.Fatalf("a silent download read: %v", err)
			}
			s.check(t)
		})
	}
}

// A streamed POST carries the gRPC Content-Type unless no_grpc_header.
func TestXHTTPNoGRPCHeader(t *testing.T) {
	for _, mode := range []string{"stream-one", "stream-up"} {
		for _, off := range []bool{false, true} {
			s := newXHServer(t, nil)
			d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: mode, NoGRPCHeader: off}, nil))
			c := xhFlow(t, d)
			xhEcho(t, c, 1000, 1000)
			c.Close()
			s.mu.Lock()
			got := s.streamed
			s.mu.Unlock()
			want := "application/grpc"
			if off {
				want = ""
			}
			if len(got) != 1 || got[0] != want {
				t.Errorf("%s, no_grpc_header %v: streamed POSTs with Content-Type %q, want one with %q", mode, off, got, want)
			}
		}
	}
}

// xhConcurrent opens n flows at once on d, checks each echoes, and
// returns them open.
func xhConcurrent(t *testing.T, d *Dialer, n int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		conns[i] = xhFlow(t, d)
	}
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { xhEcho(t, c, 20_000, 4096) })
	}
	wg.Wait()
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// By default a connection carries one flow at a time: concurrent flows
// have a connection each. max_concurrency lets that many share one;
// max_connections spreads every flow over that many.
func TestXHTTPXMuxSharing(t *testing.T) {
	cases := []struct {
		name  string
		mux   *spec.XMux
		flows int
		want  int32
	}{
		{"default", nil, 4, 4},
		{"max_concurrency 2", &spec.XMux{MaxConcurrency: [2]int64{2, 2}}, 5, 3},
		{"max_concurrency 8", &spec.XMux{MaxConcurrency: [2]int64{8, 8}}, 5, 1},
		{"max_connections 2", &spec.XMux{MaxConnections: [2]int64{2, 2}}, 5, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newXHServer(t, nil)
			d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up", XMux: tc.mux}, nil))
			conns := xhConcurrent(t, d, tc.flows)
			if n := s.accepts.Load(); n != tc.want {
				t.Errorf("%d connections for %d concurrent flows, want %d", n, tc.flows, tc.want)
			}
			// Every flow ends: the connections wait for the next ones,
			// which take them without a connect.
			closeAll(conns)
			waitFor(t, func() bool { return d.xhttp.idleCount() == int(tc.want) })
			closeAll(xhConcurrent(t, d, tc.flows))
			if n := s.accepts.Load(); n != tc.want {
				t.Errorf("%d connections after a second round of %d flows, want %d still", n, tc.flows, tc.want)
			}
		})
	}
}

// c_max_reuse_times bounds the flows a connection carries in all;
// h_max_reusable_secs how long it takes new ones.
func TestXHTTPXMuxReuseBounds(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one", XMux: &spec.XMux{CMaxReuseTimes: [2]int64{2, 2}}}, nil))
	for range 5 {
		c := xhFlow(t, d)
		xhEcho(t, c, 100, 100)
		c.Close()
		waitFor(t, func() bool { return d.xhttp.idleCount() <= 1 })
	}
	if n := s.accepts.Load(); n != 3 {
		t.Errorf("%d connections for 5 flows at 2 a connection, want 3", n)
	}

	s = newXHServer(t, nil)
	d = newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-one", XMux: &spec.XMux{HMaxReusableSecs: [2]int64{1, 1}}}, nil))
	c := xhFlow(t, d)
	xhEcho(t, c, 100, 100)
	c.Close()
	time.Sleep(1100 * time.Millisecond)
	c = xhFlow(t, d)
	xhEcho(t, c, 100, 100)
	c.Close()
	if n := s.accepts.Load(); n != 2 {
		t.Errorf("%d connections for 2 flows, the second after the first connection's 1 s, want 2", n)
	}
}

// A flow the server refuses on a shared connection does not cut the flows
// already on it: the connection takes no new flow and closes after them.
func TestXHTTPXMuxRefusalKeepsTheOtherFlows(t *testing.T) {
	s := newXHServer(t, nil)
	var refuse atomic.Bool
	s.answer = func(*http.Request) int {
		if refuse.Load() {
			return http.StatusNotFound
		}
		return 0
	}
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up", XMux: &spec.XMux{MaxConcurrency: [2]int64{4, 4}}}, nil))
	first := xhFlow(t, d)
	defer first.Close()
	xhEcho(t, first, 1000, 1000)
	refuse.Store(true)
	// The connection has answered before: the dial returns before the
	// answer, and the refusal fails the flow's reads.
	c := xhFlow(t, d)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("a refused flow read data")
	}
	c.Close()
	refuse.Store(false)
	xhEcho(t, first, 1000, 1000)
	next := xhFlow(t, d)
	defer next.Close()
	xhEcho(t, next, 1000, 1000)
	if n := s.accepts.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the refusing one kept for its first flow, a fresh one for the next", n)
	}
}

// h_keep_alive_period sets the HTTP/2 ping; below 0 there is none.
func TestXHTTPXMuxKeepAlive(t *testing.T) {
	for _, tc := range []struct {
		mux  *spec.XMux
		want time.Duration
	}{
		{nil, xhKeepAlive},
		{&spec.XMux{MaxConcurrency: [2]int64{1, 1}}, xhKeepAlive},
		{&spec.XMux{KeepAlive: 7 * time.Second}, 7 * time.Second},
		{&spec.XMux{KeepAlive: -1}, 0},
	} {
		d := newDialer(t, xhOutbound(netip.MustParseAddrPort("127.0.0.1:1"), spec.Transport{Mode: "stream-up", XMux: tc.mux}, nil))
		if got := d.xhttp.tr.HTTP2.SendPingTimeout; got != tc.want {
			t.Errorf("xmux %+v: ping after %v, want %v", tc.mux, got, tc.want)
		}
	}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}

// With download settings a flow's GET goes to the download's server and
// its uploads to the outbound's, for one session; the next flow takes both
// connections again.
func TestXHTTPDownloadSettings(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		name, mode string
		tls        bool
	}{
		{"stream-up", "stream-up", false},
		{"packet-up/http1.1", "packet-up", false},
		{"stream-up+tls", "stream-up", true},
		{"packet-up+tls", "packet-up", true},
		{"auto+tls", "auto", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg *tls.Config
			var tt *spec.TLS
			if tc.tls {
				cfg = p.serverConfig(tls.VersionTLS13, tls.VersionTLS13)
				tt = &spec.TLS{ServerName: serverName, CAFile: p.caFile}
			}
			s := newXHServer(t, cfg)
			dl := s.alsoOn(t)
			o := xhOutbound(s.addr, spec.Transport{Mode: tc.mode, MinPostsInterval: time.Millisecond,
				Download: &spec.XHTTPDownload{Server: dl.String(), TLS: tt, Path: "/xh", Host: serverName}}, tt)
			d := newDialer(t, o)
			for range 2 {
				c := xhFlow(t, d)
				xhEcho(t, c, 100_000, 8192)
				c.Close()
			}
			up, down := s.requestsAt(s.addr.Port()), s.requestsAt(dl.Port())
			if up["GET"] != 0 || up["POST"] == 0 || down["GET"] != 2 || down["POST"] != 0 {
				t.Errorf("requests at the upload's server %v, at the download's %v; want the POSTs at the first, the 2 GETs at the second", up, down)
			}
			if n, want := s.accepts.Load(), int32(2); !strings.HasPrefix(tc.name, "packet-up/http1.1") && n != want {
				t.Errorf("%d connections for 2 flows, want %d: one to each server, kept", n, want)
			}
		})
	}
}

// A download server that refuses the flow fails its dial; the upload's
// connection is kept for the next flow, the download's is not.
func TestXHTTPDownloadSettingsRefused(t *testing.T) {
	s := newXHServer(t, nil)
	dl := s.alsoOn(t)
	s.answer = func(r *http.Request) int { return http.StatusForbidden }
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up",
		Download: &spec.XHTTPDownload{Server: dl.String(), Path: "/xh", Host: "127.0.0.1"}}, nil))
	e, ctx, cancel := netx.Begin(context.Background(), nil, 5*time.Second)
	defer cancel()
	defer e.End()
	c, err := d.Dial(ctx)
	if err == nil {
		c.Close()
		t.Fatal("a refused download opened a flow")
	}
	if !strings.Contains(err.Error(), "GET /xh/") || !strings.Contains(err.Error(), dl.String()) || !strings.Contains(err.Error(), "403") {
		t.Errorf("error %q does not name the download's request, server and answer", err)
	}
	waitFor(t, func() bool { return d.xhttp.idleCount() == 1 && d.xhttp.down.idleCount() == 0 })
}

// sc_max_each_post_bytes as a range: each flow draws its bound once, and
// no POST of the flow is larger (sc_min_posts_interval_ms as a range is
// drawn for each POST; its spacing is not timed here).
func TestXHTTPPostRanges(t *testing.T) {
	s := newXHServer(t, nil)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "packet-up",
		MaxEachPostBytes: 1000, MaxEachPostBytesMax: 3000,
		MinPostsInterval: 2 * time.Millisecond, MinPostsIntervalMax: 4 * time.Millisecond}, nil))
	for range 6 {
		c := xhFlow(t, d)
		xhEcho(t, c, 30_000, 30_000)
		c.Close()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	largest := map[string]int{}
	for _, p := range s.posts {
		if p.size > 3000 {
			t.Fatalf("a POST of %d bytes, over the range's 3000", p.size)
		}
		largest[p.sess] = max(largest[p.sess], p.size)
	}
	sizes := map[int]bool{}
	for _, n := range largest {
		sizes[n] = true
	}
	if len(largest) != 6 || len(sizes) < 2 {
		t.Errorf("the largest POST of each of %d flows: %v; want bounds drawn apart per flow", len(largest), largest)
	}
}

// Warm with download settings opens one connection to each path; the flow
// after it connects to neither.
func TestXHTTPDownloadSettingsWarm(t *testing.T) {
	s := newXHServer(t, nil)
	dl := s.alsoOn(t)
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up",
		Download: &spec.XHTTPDownload{Server: dl.String(), Path: "/xh", Host: "127.0.0.1"}}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if opened, err := d.Warm(ctx, true); err != nil || !opened {
		t.Fatalf("warm: opened %v, %v", opened, err)
	}
	if d.xhttp.idleCount() != 1 || d.xhttp.down.idleCount() != 1 {
		t.Fatalf("%d upload and %d download connections kept after warm, want 1 and 1", d.xhttp.idleCount(), d.xhttp.down.idleCount())
	}
	c := xhFlow(t, d)
	xhEcho(t, c, 1000, 1000)
	c.Close()
	if n := s.accepts.Load(); n != 2 {
		t.Errorf("%d connections, want the 2 warm ones", n)
	}
	if opened, _ := d.Warm(ctx, true); opened {
		t.Error("warm opened more while both paths have a connection kept")
	}
}

// XHTTP over HTTP/3 (alpn ["h3"]): every mode echoes over QUIC; a flow
// after another takes its connection; with max_concurrency flows at once
// share one.
func TestXHTTPOverHTTP3(t *testing.T) {
	p := newPKI(t)
	tt := &spec.TLS{ServerName: serverName, CAFile: p.caFile, ALPN: []string{"h3"}}
	for _, mode := range []string{"stream-one", "stream-up", "packet-up"} {
		t.Run(mode, func(t *testing.T) {
			s := newXHServer(t, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
			h3 := s.alsoH3(t)
			d := newDialer(t, xhOutbound(h3, spec.Transport{Mode: mode, MinPostsInterval: time.Millisecond}, tt))
			for range 2 {
				c := xhFlow(t, d)
				if _, ok := c.RemoteAddr().(*net.UDPAddr); !ok {
					t.Errorf("the flow's remote end is %T %v, not the QUIC peer", c.RemoteAddr(), c.RemoteAddr())
				}
				xhEcho(t, c, 200_000, 16<<10)
				c.Close()
			}
			if n := s.accepts.Load(); n != 1 {
				t.Errorf("%d connections for 2 flows one after the other, want 1", n)
			}
			s.check(t)
		})
	}
	t.Run("xmux", func(t *testing.T) {
		s := newXHServer(t, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
		h3 := s.alsoH3(t)
		d := newDialer(t, xhOutbound(h3, spec.Transport{Mode: "stream-up", XMux: &spec.XMux{MaxConcurrency: [2]int64{4, 4}}}, tt))
		closeAll(xhConcurrent(t, d, 4))
		if n := s.accepts.Load(); n != 1 {
			t.Errorf("%d connections for 4 flows at once at 4 a connection, want 1", n)
		}
		if got := d.ProbeServer(); got.IsValid() {
			t.Errorf("a TCP connect probe would reach %v, where the server listens on UDP", got)
		}
	})
}

// A server that does not speak QUIC fails the dial within its deadline,
// naming HTTP/3.
func TestXHTTPOverHTTP3NoServer(t *testing.T) {
	p := newPKI(t)
	pc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	tt := &spec.TLS{ServerName: serverName, CAFile: p.caFile, ALPN: []string{"h3"}}
	d := newDialer(t, xhOutbound(pc.LocalAddr().(*net.UDPAddr).AddrPort(), spec.Transport{Mode: "stream-up"}, tt))
	start := time.Now()
	_, err = establish(t, d, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "HTTP/3") || time.Since(start) > 3*time.Second {
		t.Fatalf("dial to a silent UDP port: %v after %v", err, time.Since(start))
	}
}

// A download over HTTP/3 beside an upload over HTTP/2: each path runs its
// own HTTP version.
func TestXHTTPDownloadSettingsOverHTTP3(t *testing.T) {
	p := newPKI(t)
	s := newXHServer(t, p.serverConfig(tls.VersionTLS13, tls.VersionTLS13))
	h3 := s.alsoH3(t)
	up := &spec.TLS{ServerName: serverName, CAFile: p.caFile}
	down := &spec.TLS{ServerName: serverName, CAFile: p.caFile, ALPN: []string{"h3"}}
	d := newDialer(t, xhOutbound(s.addr, spec.Transport{Mode: "stream-up",
		Download: &spec.XHTTPDownload{Server: h3.String(), TLS: down, Path: "/xh", Host: serverName}}, up))
	c := xhFlow(t, d)
	if _, ok := c.RemoteAddr().(*net.UDPAddr); !ok {
		t.Errorf("the download's remote end is %T, not the QUIC peer", c.RemoteAddr())
	}
	xhEcho(t, c, 200_000, 16<<10)
	c.Close()
	if ups := s.requestsAt(s.addr.Port()); ups["GET"] != 0 || ups["POST"] != 1 {
		t.Errorf("requests over HTTP/2 %v, want the one streamed POST", ups)
	}
}
