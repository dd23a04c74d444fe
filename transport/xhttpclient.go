package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// xhttpClient is one outbound's XHTTP client. Over HTTP/2 its flows share
// connections as Xray's client lets them (xmux, xhttpClient.take): by
// default one flow at a time on a connection, which serves 600 to 900
// requests and 30 to 50 minutes, so that concurrent flows each have their
// own connection and its own flow-control windows, and a flow that follows
// another starts without a connect or a TLS handshake; max_concurrency N
// lets N flows at once on a connection, max_connections N spreads the
// flows over N connections. Over HTTP/1.1 every flow opens its connections.
type xhttpClient struct {
	d   *Dialer
	cfg *xhttpConfig
	// establish bounds the connect of a packet-up upload connection
	// (HTTP/1.1), which no dial's deadline covers.
	establish time.Duration
	tr        *http.Transport
	// concurrency bounds the flows at once on a connection; connections
	// is how many connections open before flows share them (0: no
	// bound), each drawn once from its xmux range.
	concurrency, connections int64
	keepAlive                time.Duration // xmux h_keep_alive_period (0: the default)
	// The per-connection bounds, drawn for each connection.
	reuseTimes, requestTimes, reusableSecs [2]int64

	// h3 opens the HTTP/3 connections (alpn ["h3"]); nil otherwise.
	h3 *h3Client
	// down, when set, carries the flows' downloads (the download
	// settings): this client sends only their uploads.
	down *xhttpClient

	mu      sync.Mutex
	conns   []*xhH2            // HTTP/2 connections new flows may take, oldest first
	idle    []*xhH2            // those of conns without a flow, the last idle last
	pending int                // connects under way for conns
	live    map[*xhH2]struct{} // every HTTP/2 connection not closed
	closed  bool
	idleN   atomic.Int32 // the connections in conns without a flow
}

const (
	// xhttpIdle closes an HTTP/2 connection after this long without a flow.
	xhttpIdle = 60 * time.Second
	// xhIdleMax bounds the idle HTTP/2 connections kept. A flow holds its
	// connection until its download ends, which the server may end a second
	// or two after the application is gone (its own timers; packet-up has
	// no end of upload to tell it), so flows at a high rate need as many
	// connections as that second sees flows: a bound lower than that
	// closes connections the next flows would have taken and makes them
	// pay a TLS handshake each.
	xhIdleMax = 1024
	// xhIdleTries bounds the kept connections one dial tries before it
	// connects afresh.
	xhIdleTries = 2
	// xhKeepAlive pings an HTTP/2 connection after this long without a
	// frame from the server (xmux h_keep_alive_period changes it); a
	// ping unanswered for xhPingTimeout closes it.
	xhKeepAlive   = 30 * time.Second
	xhPingTimeout = 15 * time.Second
)

// The default xmux bounds, as Xray's client has them without an xmux
// table: one flow at a time on a connection, 600..900 requests, 1800..3000
// seconds.
var (
	xhReuseRequests = [2]int64{600, 900}
	xhReuseAge      = [2]int64{1800, 3000}
)

func newXHTTPClient(d *Dialer, cfg *xhttpConfig, connect time.Duration) *xhttpClient {
	x := &xhttpClient{d: d, cfg: cfg, establish: netx.EstablishTimeout(connect), live: map[*xhH2]struct{}{}}
	keepAlive := xhKeepAlive
	if m := cfg.mux; m != nil {
		x.concurrency = drawInt(m.MaxConcurrency)
		x.connections = drawInt(m.MaxConnections)
		x.reuseTimes, x.requestTimes, x.reusableSecs = m.CMaxReuseTimes, m.HMaxRequestTimes, m.HMaxReusableSecs
		switch {
		case m.KeepAlive > 0:
			keepAlive = m.KeepAlive
		case m.KeepAlive < 0:
			keepAlive = 0 // no ping
		}
		x.keepAlive = m.KeepAlive
	} else {
		x.concurrency = 1
		x.requestTimes, x.reusableSecs = xhReuseRequests, xhReuseAge
	}
	protos := new(http.Protocols)
	if cfg.h1 {
		protos.SetHTTP1(true)
	} else {
		protos.SetUnencryptedHTTP2(true)
	}
	// Every connection is this client's own connect (socket policy,
	// keepalive, TLS with the outbound's ALPN and fingerprint); the HTTP
	// stack sees a cleartext stream, on which HTTP/2 starts with prior
	// knowledge: over TLS that is h2 negotiated by ALPN.
	x.tr = &http.Transport{
		Protocols:          protos,
		DisableCompression: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, err := d.connect(ctx)
			if h, ok := ctx.Value(xhRawKey{}).(*net.Conn); ok && err == nil {
				*h = c
			}
			return c, err
		},
		HTTP2:                  &http.HTTP2Config{SendPingTimeout: keepAlive, PingTimeout: xhPingTimeout},
		MaxResponseHeaderBytes: 64 << 10,
	}
	return x
}

// xhRawKey is the context key under which newConn learns the connection
// its HTTP connection runs on.
type xhRawKey struct{}

// newConn opens one HTTP connection under ctx: connect, TLS, and for
// HTTP/2 the connection preface. raw is the connection under it.
func (x *xhttpClient) newConn(ctx context.Context) (cc *http.ClientConn, raw net.Conn, err error) {
	cc, err = x.tr.NewClientConn(context.WithValue(ctx, xhRawKey{}, &raw), "http", x.d.server.String())
	if err != nil {
		var fe *netx.FaultError
		if errors.As(err, &fe) {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("xhttp: connecting to %s: %w", x.d.server, err)
	}
	return cc, raw, nil
}

// dial opens a flow: the session's requests, returning once the download's
// response headers arrived (a server that does not answer fails the dial
// under its deadline). With download settings the download's connection
// comes first (its answer proves that path), then the upload's.
func (x *xhttpClient) dial(ctx context.Context) (net.Conn, error) {
	if x.down == nil {
		return x.withHold(ctx, func(h xhHold) (*xhConn, error) { return openXHConn(ctx, h, h) })
	}
	return x.down.withHold(ctx, func(dl xhHold) (*xhConn, error) {
		ul, err := x.uploadHold(ctx)
		if err != nil {
			dl.release(true)
			return nil, err
		}
		return openXHConn(ctx, ul, dl)
	})
}

// xhHold is a flow's hold on one HTTP connection of a client.
type xhHold struct {
	x   *xhttpClient
	cc  xhCC // nil: none (an HTTP/1.1 upload opens its own)
	raw xhAddrs
	// requests counts the requests on cc (HTTP/2: its reuse bound);
	// answered says the server answered a flow on cc. Both nil over
	// HTTP/1.1.
	requests *atomic.Int64
	answered *atomic.Bool
	// release gives the hold back, once; answered false when the flow
	// could not open on cc or its download was refused or unanswered,
	// so that cc takes no new flow.
	release func(answered bool)
	// adopt, when a speculative dial brought cc up, lists it for the
	// flows after this one (Commit); nil otherwise.
	adopt func()
}

// count counts one request on h's connection.
func (h *xhHold) count() {
	if h.requests != nil {
		h.requests.Add(1)
	}
}

// hold is a flow's hold on c, which counts the flow already; unlisted:
// a speculative dial brought c up, and lists it once committed.
func (x *xhttpClient) hold(c *xhH2, unlisted bool) xhHold {
	h := xhHold{x: x, cc: c.cc, raw: c.raw, requests: &c.requests, answered: &c.answered,
		release: func(answered bool) { x.release(c, answered) }}
	if unlisted {
		h.adopt = func() {
			x.mu.Lock()
			x.listLocked(c)
			x.mu.Unlock()
		}
	}
	return h
}

// withHold opens a flow with open on a connection of x's. Over HTTP/1.1
// that is a fresh connection, closed with the flow. Over HTTP/2 it is a
// kept connection when one can take the flow: no physical connect, but the
// flow's requests are its handshake, so it takes the dial's admission
// permit; a flow that cannot open on it (the server may have let it go)
// tries the next, or a fresh connection.
func (x *xhttpClient) withHold(ctx context.Context, open func(xhHold) (*xhConn, error)) (net.Conn, error) {
	if x.cfg.h1 {
		cc, raw, err := x.newConn(ctx)
		if err != nil {
			return nil, err
		}
		netx.Mark(ctx, netx.PhaseTransport)
		return asConn(open(xhHold{x: x, cc: cc, raw: raw, release: func(bool) { cc.Close() }}))
	}
	x.mu.Lock()
	closed := x.closed
	x.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	// A dial outside an establishment (a health probe, a delay test)
	// connects afresh: it measures the path, and leaves the kept
	// connections to flows.
	for try := 0; try < xhIdleTries && netx.Establishing(ctx); try++ {
		c := x.take()
		if c == nil {
			break
		}
		if err := netx.Admit(ctx); err != nil {
			x.release(c, true)
			return nil, err
		}
		netx.MarkPooled(ctx)
		netx.Mark(ctx, netx.PhaseTransport)
		conn, err := open(x.hold(c, false))
		if err == nil || ctx.Err() != nil {
			return asConn(conn, err)
		}
	}
	// A speculative dial keeps the connection it brings up to itself
	// until its link is committed.
	speculative := netx.Speculative(ctx)
	c, err := x.connectH2(ctx, 1, !speculative)
	if err != nil {
		return nil, err
	}
	netx.Mark(ctx, netx.PhaseTransport)
	return asConn(open(x.hold(c, speculative)))
}

// uploadHold is the hold of a flow's uploads when its download has its own
// client: a kept HTTP/2 connection that can take the flow, or a fresh one;
// over HTTP/1.1 none, since the POSTs open their own connection.
func (x *xhttpClient) uploadHold(ctx context.Context) (xhHold, error) {
	if x.cfg.h1 {
		return xhHold{x: x, release: func(bool) {}}, nil
	}
	if netx.Establishing(ctx) {
		if c := x.take(); c != nil {
			return x.hold(c, false), nil
		}
	}
	speculative := netx.Speculative(ctx)
	c, err := x.connectH2(ctx, 1, !speculative)
	if err != nil {
		return xhHold{}, err
	}
	return x.hold(c, speculative), nil
}

// asConn is a flow's conn, or its error with a nil net.Conn.
func asConn(c *xhConn, err error) (net.Conn, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// idleCount is how many HTTP/2 connections wait for a flow.
func (x *xhttpClient) idleCount() int { return int(x.idleN.Load()) }

// warm opens one HTTP/2 connection for the next flow when no kept one can
// take it, and max_connections (when set) is not reached.
func (x *xhttpClient) warm(ctx context.Context) (bool, error) {
	if x.down != nil {
		// The download's connection first: a flow waits on it.
		warmed, err := x.down.warm(ctx)
		if err != nil && !errors.Is(err, ErrNothingToWarm) {
			return warmed, err
		}
		up, err := x.warmOwn(ctx)
		if errors.Is(err, ErrNothingToWarm) {
			err = nil
		}
		return warmed || up, err
	}
	return x.warmOwn(ctx)
}

// warmOwn is warm for x's own connections.
func (x *xhttpClient) warmOwn(ctx context.Context) (bool, error) {
	if x.cfg.h1 {
		return false, ErrNothingToWarm
	}
	x.mu.Lock()
	ready := x.idleN.Load() > 0 || x.pending > 0 ||
		x.connections > 0 && int64(len(x.conns)) >= x.connections
	for _, c := range x.conns {
		ready = ready || x.concurrency == 0 || int64(c.flows) < x.concurrency
	}
	x.mu.Unlock()
	if ready {
		return false, nil
	}
	if _, err := x.connectH2(ctx, 0, true); err != nil {
		return false, err
	}
	return true, nil
}

// close ends every connection with its flows and refuses later dials.
func (x *xhttpClient) close() {
	if x.down != nil {
		x.down.close()
	}
	x.mu.Lock()
	x.closed = true
	conns := make([]*xhH2, 0, len(x.live))
	for c := range x.live {
		conns = append(conns, c)
	}
	x.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// purge lets the kept connections go: the idle ones close, the others when
// their flows end; the next flow connects afresh.
func (x *xhttpClient) purge() {
	if x.down != nil {
		x.down.purge()
	}
	var idle []*xhH2
	x.mu.Lock()
	for _, c := range slices.Clone(x.conns) {
		if c.flows == 0 {
			idle = append(idle, c)
		}
		x.unlistLocked(c)
	}
	x.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}
