package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"switchyard/health"
	"switchyard/netx"
)

// Dialer is what a probe needs of a node: its outbound (an
// outbound.Outbound is one).
type Dialer interface {
	DialStream(ctx context.Context, f netx.Flow) (net.Conn, error)
	DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error)
}

// FamilyReporter is implemented by a conn, a packet link or a Dialer that
// knows the address family of its connection to the node's server when
// that cannot be read from a conn's RemoteAddr (a tunnel whose streams name
// the destination inside it, a packet link). ok is false when it does not
// know.
type FamilyReporter interface {
	ServerFamily() (f netx.Family, ok bool)
}

// Timeouts are the budgets of a probe's phases. Each phase ends at its own
// budget or at the probe context's deadline, whichever comes first; a zero
// budget takes its default.
type Timeouts struct {
	// Dial bounds DialStream or DialPacket through the node (the proxy's
	// connect and handshake), and a raw connect.
	Dial time.Duration
	// TLS bounds the TLS handshake with the probe URL's server.
	TLS time.Duration
	// HTTP2Startup bounds the HTTP/2 preface and the server's SETTINGS.
	HTTP2Startup time.Duration
	// Request bounds each request: its write and its response heads; for
	// the UDP probe, the wait for the DNS answer.
	Request time.Duration
}

// The default budgets.
const (
	DefaultDialTimeout         = netx.DefaultConnectTimeout
	DefaultTLSTimeout          = 10 * time.Second
	DefaultHTTP2StartupTimeout = 5 * time.Second
	DefaultRequestTimeout      = 5 * time.Second
)

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Dial, DefaultDialTimeout)
	def(&t.TLS, DefaultTLSTimeout)
	def(&t.HTTP2Startup, DefaultHTTP2StartupTimeout)
	def(&t.Request, DefaultRequestTimeout)
	return t
}

// Options are a prober's settings; all are optional.
type Options struct {
	// Server is the node's TCP server, which a raw connect probe (TCP with
	// url "") connects to: outbound.Prober's ProbeTarget when the outbound
	// has one. When it is zero, a raw connect probe becomes an HTTP probe
	// of DefaultURL through the node.
	Server netx.Addr
	// DialTCP opens the raw connect probe's connection; nil uses a plain
	// net.Dialer. Pass the socket policy's dialer here.
	DialTCP func(ctx context.Context, addr netx.Addr) (net.Conn, error)
	// RootCAs verifies the probe URL's server; nil uses the system roots.
	RootCAs *x509.CertPool
	// Timeouts are the phase budgets.
	Timeouts Timeouts
	// Log receives the probe's debug records; nil discards them.
	Log *slog.Logger
}

// New returns the prober of the node reached through out.
func New(out Dialer, opts Options) health.Prober {
	p := &prober{out: out, opts: opts, t: opts.Timeouts.withDefaults(), log: opts.Log}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.opts.DialTCP == nil {
		p.opts.DialTCP = func(ctx context.Context, a netx.Addr) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", a.String())
		}
	}
	return p
}

type prober struct {
	out  Dialer
	opts Options
	t    Timeouts
	log  *slog.Logger
}

// TCP probes the node: an HTTP probe of url with method (see the package
// documentation), or, with url "", a raw connect to Options.Server.
func (p *prober) TCP(ctx context.Context, url, method string) (health.Result, error) {
	if url == "" {
		if p.opts.Server.IsValid() {
			return p.connect(ctx)
		}
		url, method = DefaultURL, "HEAD"
	}
	t, err := parseTarget(url)
	if err != nil {
		return health.Result{}, err
	}
	m, err := parseMethod(method)
	if err != nil {
		return health.Result{}, err
	}
	return p.http(ctx, &t, m)
}

// fail returns err with its family when known.
func fail(f netx.Family, known bool, err error) (health.Result, error) {
	if known {
		return health.Result{}, &health.FamilyError{Family: f, Err: err}
	}
	return health.Result{}, err
}

// phase runs fn with c bound to ctx and to budget.
func phase(ctx context.Context, c net.Conn, budget time.Duration, fn func() error) error {
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	return netx.Within(pctx, c, fn)
}

func (p *prober) http(ctx context.Context, t *target, method string) (health.Result, error) {
	dctx, cancel := context.WithTimeout(ctx, p.t.Dial)
	raw, err := p.out.DialStream(dctx, netx.Flow{Network: netx.TCP, Dst: t.dst})
	cancel()
	if err != nil {
		f, known := p.family(nil)
		return fail(f, known, fmt.Errorf("probe: dialing %s through the node: %w", t.dst, err))
	}
	// Closing the node's stream, not the TLS conn over it, drops the probe
	// connection at once: a close_notify could wait on a stalled path.
	defer raw.Close()
	f, known := p.family(raw)

	c, h2 := raw, false
	if t.https {
		tc := tls.Client(raw, &tls.Config{
			ServerName: t.serverName,
			RootCAs:    p.opts.RootCAs,
			NextProtos: []string{"h2", "http/1.1"},
			MinVersion: tls.VersionTLS12,
		})
		if err := phase(ctx, raw, p.t.TLS, tc.Handshake); err != nil {
			return fail(f, known, fmt.Errorf("probe: TLS handshake with %s: %w", t.authority, err))
		}
		c, h2 = tc, tc.ConnectionState().NegotiatedProtocol == "h2"
	}

	var rtt time.Duration
	if h2 {
		rtt, err = p.http2(ctx, raw, c, t, method)
	} else {
		rtt, err = p.http1(ctx, raw, c, t, method)
	}
	if err != nil {
		return fail(f, known, err)
	}
	return health.Result{RTT: rtt, Family: f}, nil
}

func (p *prober) http1(ctx context.Context, raw, c net.Conn, t *target, method string) (time.Duration, error) {
	h := &h1{c: c}
	var (
		first, second time.Duration
		fin           head
		got           bool
	)
	err := phase(ctx, raw, p.t.Request, func() (err error) {
		first, fin, _, err = h.round(t, "HEAD")
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("probe: warm-up HEAD %s%s: %w", t.authority, t.path, err)
	}
	if fin.close {
		p.log.Debug("probe: the server closes after the warm-up; keeping its sample",
			"url", t.scheme()+"://"+t.authority+t.path)
		return first, nil
	}
	err = phase(ctx, raw, p.t.Request, func() (err error) {
		second, _, got, err = h.round(t, method)
		return err
	})
	if err != nil {
		if !got && ctx.Err() == nil {
			p.keepFirst(t, method, err)
			return first, nil
		}
		return 0, fmt.Errorf("probe: %s %s%s: %w", method, t.authority, t.path, err)
	}
	return second, nil
}

func (p *prober) http2(ctx context.Context, raw, c net.Conn, t *target, method string) (time.Duration, error) {
	h := newH2(c)
	if err := phase(ctx, raw, p.t.HTTP2Startup, h.start); err != nil {
		return 0, fmt.Errorf("probe: HTTP/2 startup with %s: %w", t.authority, err)
	}
	var first, second time.Duration
	err := phase(ctx, raw, p.t.Request, func() (err error) {
		first, err = h.round(t, "HEAD")
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("probe: warm-up HEAD %s%s: %w", t.authority, t.path, err)
	}
	err = phase(ctx, raw, p.t.Request, func() (err error) {
		second, err = h.round(t, method)
		return err
	})
	if err != nil {
		if errors.Is(err, errRefused) && ctx.Err() == nil {
			p.keepFirst(t, method, err)
			return first, nil
		}
		return 0, fmt.Errorf("probe: %s %s%s: %w", method, t.authority, t.path, err)
	}
	return second, nil
}

func (p *prober) keepFirst(t *target, method string, err error) {
	p.log.Debug("probe: second request failed; keeping the warm-up sample",
		"url", t.scheme()+"://"+t.authority+t.path, "method", method, "err", err)
}

// connect is the raw connect probe: the time DialTCP takes to connect to
// the node's server.
func (p *prober) connect(ctx context.Context) (health.Result, error) {
	server := p.opts.Server
	dctx, cancel := context.WithTimeout(ctx, p.t.Dial)
	defer cancel()
	start := time.Now()
	c, err := p.opts.DialTCP(dctx, server)
	rtt := time.Since(start)
	if err != nil {
		f, known := serverFamily(server)
		return fail(f, known, fmt.Errorf("probe: connecting to %s: %w", server, err))
	}
	f, ok := addrFamily(c.RemoteAddr())
	c.Close()
	if !ok {
		f, _ = serverFamily(server)
	}
	return health.Result{RTT: rtt, Family: f}, nil
}

// UDP sends one DNS query to server through the node's packet path and
// times its answer.
func (p *prober) UDP(ctx context.Context, server netx.Addr) (health.Result, error) {
	if !server.IsValid() {
		return health.Result{}, errors.New("probe: no DNS server to ask")
	}
	if server.Port == 0 {
		server.Port = 53
	}
	dctx, cancel := context.WithTimeout(ctx, p.t.Dial)
	link, err := p.out.DialPacket(dctx, netx.Flow{Network: netx.UDP, Dst: server})
	cancel()
	if err != nil {
		f, known := p.family(nil)
		return fail(f, known, fmt.Errorf("probe: opening the packet path to %s: %w", server, err))
	}
	defer link.Close()
	f, known := p.family(link)

	// The wait for the answer ends at the request budget: closing the link
	// is what unblocks its ReadPacket.
	rctx, cancel := context.WithTimeout(ctx, p.t.Request)
	defer cancel()
	closed := make(chan struct{})
	stop := context.AfterFunc(rctx, func() {
		link.Close()
		close(closed)
	})
	defer func() {
		if !stop() {
			<-closed
		}
	}()

	id := uint16(rand.Uint32())
	q := appendQuery(make([]byte, 0, len(dnsQuery)), id)
	buf := make([]byte, 4096)
	start := time.Now()
	if err := link.WritePacket(q, server); err != nil {
		return fail(f, known, fmt.Errorf("probe: sending the DNS query to %s: %w", server, udpErr(rctx, err)))
	}
	for {
		n, _, err := link.ReadPacket(buf)
		if err != nil {
			return fail(f, known, fmt.Errorf("probe: no DNS answer from %s: %w", server, udpErr(rctx, err)))
		}
		if checkReply(buf[:n], id) == nil {
			return health.Result{RTT: time.Since(start), Family: f}, nil
		}
	}
}

// udpErr is the cause of the probe's end when its context ended (the link's
// error is then only the close), err otherwise.
func udpErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	return err
}

// family is the address family of the connection to the node's server that
// x (a conn, a packet link, or nil before one exists) runs on: x's own
// report, the Dialer's, a conn's remote address, the IP of Options.Server.
// known is false when none tells: the family is then V4.
func (p *prober) family(x any) (f netx.Family, known bool) {
	if r, ok := x.(FamilyReporter); ok {
		if f, ok := r.ServerFamily(); ok {
			return f, true
		}
	}
	if r, ok := p.out.(FamilyReporter); ok {
		if f, ok := r.ServerFamily(); ok {
			return f, true
		}
	}
	if c, ok := x.(net.Conn); ok {
		if f, ok := addrFamily(c.RemoteAddr()); ok {
			return f, true
		}
	}
	return serverFamily(p.opts.Server)
}

func serverFamily(a netx.Addr) (netx.Family, bool) {
	if a.IP.IsValid() {
		return netx.FamilyOf(a.IP), true
	}
	return netx.V4, false
}

// addrFamily reads the family of a socket address.
func addrFamily(a net.Addr) (netx.Family, bool) {
	var ip netip.Addr
	switch a := a.(type) {
	case *net.TCPAddr:
		if a != nil {
			ip, _ = netip.AddrFromSlice(a.IP)
		}
	case *net.UDPAddr:
		if a != nil {
			ip, _ = netip.AddrFromSlice(a.IP)
		}
	case nil:
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			ip = ap.Addr()
		}
	}
	if !ip.IsValid() || ip.IsUnspecified() {
		return netx.V4, false
	}
	return netx.FamilyOf(ip), true
}
