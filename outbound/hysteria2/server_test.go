package hysteria2

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apernet/hysteria/core/v2/server"

	"switchyard/internal/slot"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/hysteria2/internal/hy2test"
	"switchyard/spec"
)

const (
	testHost     = hy2test.Host
	testPassword = hy2test.Password
)

// testCert is a self-signed certificate for testHost and the PEM file a
// client takes as its ca_file.
type testCert struct {
	cert   tls.Certificate
	caFile string
}

func newTestCert(t *testing.T) testCert {
	t.Helper()
	c := hy2test.NewCert(t)
	return testCert{cert: c.Certificate, caFile: c.CAFile}
}

// testServer is the in-process core/v2 Hysteria 2 server of hy2test, under
// the names this package's tests use.
type testServer struct {
	*hy2test.Server
	addr     netip.AddrPort
	cert     testCert
	sessions *atomic.Int32  // connections that authenticated
	lastTx   *atomic.Uint64 // the receive rate the last client announced
}

type serverOptions struct {
	disableUDP bool
	obfs       string
	outbound   server.Outbound // nil: the server's own direct dialing
}

func startServer(t *testing.T, opts serverOptions) *testServer {
	t.Helper()
	s := hy2test.Start(t, hy2test.Options{DisableUDP: opts.disableUDP, Obfs: opts.obfs, Outbound: opts.outbound})
	return &testServer{
		Server:   s,
		addr:     s.Addr,
		cert:     testCert{cert: s.Cert.Certificate, caFile: s.Cert.CAFile},
		sessions: &s.Sessions,
		lastTx:   &s.LastTx,
	}
}

// testSpec is a Hysteria 2 outbound aimed at addr that trusts cert.
func testSpec(addr netip.AddrPort, cert testCert) spec.Outbound {
	return spec.Outbound{
		Tag:      "hy2",
		Type:     "hysteria2",
		UDP:      true,
		Server:   addr.String(),
		Password: testPassword,
		TLS:      &spec.TLS{ServerName: testHost, ALPN: []string{"h3"}, CAFile: cert.caFile},
	}
}

// logBuf collects an outbound's log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
func (l *logBuf) count(s string) int          { return strings.Count(l.String(), s) }

// sockets is a socket policy hook that records every socket and may refuse
// or hold them.
type sockets struct {
	mu     sync.Mutex
	seen   []netx.SocketInfo
	refuse error
	gate   chan struct{} // when set, each socket waits for it to close
}

func (s *sockets) hook(info netx.SocketInfo) error {
	s.mu.Lock()
	s.seen = append(s.seen, info)
	refuse, gate := s.refuse, s.gate
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return refuse
}

func (s *sockets) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.seen) }

// manualClock is a clock that moves only when told to.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock { return &manualClock{now: time.Unix(1_000_000, 0)} }

func (c *manualClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// harness builds outbounds for a test with a recording socket policy, a log
// buffer and, when clk is set, an injected clock; each is closed at cleanup.
type harness struct {
	t       *testing.T
	sockets *sockets
	logs    *logBuf
	clock   clock
	timeout time.Duration
	servers netx.Resolver
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, sockets: &sockets{}, logs: &logBuf{}, clock: systemClock{}}
}

func (h *harness) deps() outbound.Deps {
	p := netx.SocketPolicy{Hook: h.sockets.hook}
	return outbound.Deps{
		Dialer:         netx.NewDialer(p, 0),
		Servers:        h.servers,
		Logger:         slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		ConnectTimeout: h.timeout,
	}
}

func (h *harness) outbound(o spec.Outbound) *Outbound {
	h.t.Helper()
	out, err := newOutbound(o, h.deps(), h.clock.Now)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { out.Close() })
	return out
}

// tcpEcho is a loopback TCP echo server.
func tcpEcho(t *testing.T) netx.Addr {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return netx.AddrFromAddrPort(ln.Addr().(*net.TCPAddr).AddrPort())
}

// udpEcho answers every datagram with prefix+payload.
func udpEcho(t *testing.T, prefix string) netx.Addr {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { c.Close(); <-done })
	go func() {
		defer close(done)
		b := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(append([]byte(prefix), b[:n]...), from)
		}
	}()
	return netx.AddrFromAddrPort(c.LocalAddr().(*net.UDPAddr).AddrPort())
}

// echoOnce writes msg on c and requires it back.
func echoOnce(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != msg {
		t.Fatalf("echo = %q, want %q", got, msg)
	}
}

func dialEcho(t *testing.T, o *Outbound, echo netx.Addr) {
	t.Helper()
	c, err := o.DialStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: echo})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	echoOnce(t, c, "hello through hysteria2")
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// snapshot reports the phase of o's slot and its failure count.
func snapshot(o *Outbound) (slot.Phase, int) {
	st, _ := o.SlotState()
	return st.Phase, st.Failures
}

// down reports whether o's slot has no connection in service and none
// under way.
func down(o *Outbound) bool {
	st, _ := snapshot(o)
	return st == slot.Idle || st == slot.Backoff
}

// clock is the slot's time source in a test.
type clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// blackhole is a UDP address that takes datagrams and never answers.
func blackhole(t *testing.T) netip.AddrPort {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.LocalAddr().(*net.UDPAddr).AddrPort()
}
