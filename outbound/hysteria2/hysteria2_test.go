package hysteria2

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

func TestStreamsEchoThroughTheServer(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	echo := tcpEcho(t)
	dialEcho(t, o, echo)
	dialEcho(t, o, echo)
	if n := srv.sessions.Load(); n != 1 {
		t.Fatalf("two flows made %d server sessions, want 1 (the outbound keeps its connection)", n)
	}
	if n := h.sockets.count(); n != 1 {
		t.Fatalf("two flows opened %d sockets, want 1", n)
	}
}

func TestSalamanderWrapsTheSocket(t *testing.T) {
	srv := startServer(t, serverOptions{obfs: "obfs-secret"})
	h := newHarness(t)
	s := testSpec(srv.addr, srv.cert)
	s.Obfs = &spec.Obfs{Type: "salamander", Password: "obfs-secret"}
	dialEcho(t, h.outbound(s), tcpEcho(t))

	// Without the obfuscation the server hears noise and never answers.
	h2 := newHarness(t)
	h2.timeout = 500 * time.Millisecond
	plain := h2.outbound(testSpec(srv.addr, srv.cert))
	_, err := plain.DialStream(context.Background(), netx.Flow{Dst: tcpEcho(t)})
	if err == nil || !strings.HasPrefix(err.Error(), "hysteria2: no address answered ("+srv.addr.String()+": ") {
		t.Fatalf("plain client against a salamander server: %v", err)
	}
}

func TestARefusedDestinationIsADialError(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := netx.AddrFromAddrPort(ln.Addr().(*net.TCPAddr).AddrPort())
	ln.Close()
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: closed})
	if err == nil {
		c.Close()
		t.Fatal("a destination the server cannot reach gave a stream")
	}
	if !strings.HasPrefix(err.Error(), "hysteria2: "+closed.String()+": dial error: ") {
		t.Fatalf("error = %q", err)
	}
	// The server's refusal is a refused connection to the SOCKS inbound.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("error %q does not match ECONNREFUSED", err)
	}
	// The connection is fine: the next flow rides it.
	dialEcho(t, o, tcpEcho(t))
	if n := srv.sessions.Load(); n != 1 {
		t.Fatalf("%d server sessions, want 1", n)
	}
}

func TestTheHandshakeHonoursTheContext(t *testing.T) {
	held := newHeldOutbound()
	defer held.release()
	srv := startServer(t, serverOptions{outbound: held})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	c, err := o.DialStream(ctx, netx.Flow{Dst: netx.DomainAddr("held.test", 80)})
	if err == nil {
		c.Close()
		t.Fatal("a destination the server never reaches gave a stream")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("the dial took %s past a 300ms deadline", d)
	}
}

func TestConstructionOpensNothing(t *testing.T) {
	h := newHarness(t)
	s := testSpec(netip.MustParseAddrPort("192.0.2.1:443"), testCert{caFile: "/does/not/exist.pem"})
	o, err := New(s, h.deps())
	if err != nil {
		t.Fatalf("a valid spec with a missing CA file: %v", err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if n := h.sockets.count(); n != 0 {
		t.Fatalf("construction opened %d sockets", n)
	}
	if _, err := o.DialStream(context.Background(), netx.Flow{Dst: netx.DomainAddr("example.com", 80)}); !errors.Is(err, errClosed) {
		t.Fatalf("dial after Close: %v", err)
	}
}

func TestConstructionRefusesWhatHysteria2CannotDo(t *testing.T) {
	base := testSpec(netip.MustParseAddrPort("192.0.2.1:443"), testCert{})
	cases := []struct {
		name string
		edit func(*spec.Outbound)
		want string
	}{
		{"alpn", func(o *spec.Outbound) { o.TLS.ALPN = []string{"h2"} }, "tls alpn must be"},
		{"fingerprint", func(o *spec.Outbound) { o.TLS.Fingerprint = "chrome" }, "fingerprint does not apply"},
		{"obfs type", func(o *spec.Outbound) { o.Obfs = &spec.Obfs{Type: "gecko", Password: "long enough"} }, `unknown obfs type "gecko"`},
		{"obfs password", func(o *spec.Outbound) { o.Obfs = &spec.Obfs{Type: "salamander", Password: "abc"} }, "at least 4 bytes"},
		{"bandwidth", func(o *spec.Outbound) { o.UpMbps = -1 }, "must not be negative"},
		{"server", func(o *spec.Outbound) { o.Server = "no-port" }, "hysteria2: server:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tls := *base.TLS
			s.TLS = &tls
			tc.edit(&s)
			_, err := New(s, newHarness(t).deps())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestBandwidthSelectsBrutalOrBBR(t *testing.T) {
	srv := startServer(t, serverOptions{})
	echo := tcpEcho(t)

	s := testSpec(srv.addr, srv.cert)
	s.UpMbps, s.DownMbps = 100, 50
	brutal := newHarness(t).outbound(s)
	dialEcho(t, brutal, echo)
	r, err := brutal.slot.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if c := r.V; c.tx != 100*125_000 {
		t.Fatalf("up_mbps = 100: send rate %d bytes/s, want Brutal at 12500000", c.tx)
	}
	if got := srv.lastTx.Load(); got != 50*125_000 {
		t.Fatalf("down_mbps = 50: the server was told %d bytes/s, want 6250000", got)
	}

	bbr := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	dialEcho(t, bbr, echo)
	r, err = bbr.slot.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if c := r.V; c.tx != 0 {
		t.Fatalf("up_mbps = 0: send rate %d, want 0 (BBR)", c.tx)
	}
	if got := srv.lastTx.Load(); got != 0 {
		t.Fatalf("down_mbps = 0: the server was told %d bytes/s, want 0", got)
	}
}

func TestTheOutboundIsNotABalancerMember(t *testing.T) {
	// Hysteria 2 listens on UDP: a TCP health probe would mark it down for
	// ever, so it offers no probe target.
	var o outbound.Outbound = newHarness(t).outbound(testSpec(netip.MustParseAddrPort("192.0.2.1:443"), testCert{}))
	if _, ok := o.(outbound.Prober); ok {
		t.Fatal("hysteria2 implements Prober")
	}
}

func TestCloseEndsTheFlowsOnTheConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	c, err := o.DialStream(context.Background(), netx.Flow{Dst: tcpEcho(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o.Close()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a stream's read after Close: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 64)); !errors.Is(err, errGone) {
		t.Fatalf("a link's read after Close: %v", err)
	}
}
