package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
	"switchyard/spec"
)

// XHTTP (Xray's "splithttp") carries a flow over plain HTTP requests, in
// one of three modes:
//
//   - stream-one: one POST whose request body is the upload and whose
//     response body is the download, over HTTP/2;
//   - stream-up: a GET for the download and one streaming POST for the
//     upload, both on <path>/<session>, over HTTP/2;
//   - packet-up: a GET for the download and the upload cut in POSTs of at
//     most sc_max_each_post_bytes, each on <path>/<session>/<seq> with seq
//     counting from 0, sent sc_min_posts_interval_ms apart at the least
//     (but for the second, which carries the first bytes after a proxy's
//     request header);
//     the server puts them back in order. Over HTTP/2, or HTTP/1.1.
//
// Every request carries an x_padding of x_padding_bytes "X"s as the query
// of its Referer, which the server checks is in its range. auto is
// packet-up, as Xray's client picks it outside REALITY.
//
// HTTP/2 runs over TLS with ALPN h2, or without TLS as cleartext HTTP/2
// with prior knowledge (h2c); a connection carries one flow at a time, or
// as many as xmux lets, and is kept for the flows after it (xhttpClient). HTTP/1.1 (packet-up
// without TLS, or over TLS with alpn ["http/1.1"]) opens the GET's
// connection and one upload connection per flow, kept alive from POST to
// POST.
type xhttpConfig struct {
	mode        string // stream-one | stream-up | packet-up
	h1          bool   // HTTP/1.1 (packet-up only)
	h3          bool   // HTTP/3 (alpn ["h3"])
	scheme      string // https over TLS; http without
	host        string // Host and :authority
	path        string // the base path, ending in "/"
	query       string // the query every request carries
	headers     http.Header
	padMin      int
	xs          string // padMax "X"s, which every padding is a prefix of
	referer     string // the Referer up to its padding
	padMax      int
	maxPost     [2]int           // a flow's POST bound, drawn once per flow
	minInterval [2]time.Duration // the wait before each POST, drawn for each
	noGRPC      bool             // streamed POSTs go without the gRPC Content-Type
	mux         *spec.XMux       // nil: the default sharing of HTTP/2 connections
}

// The defaults the loader fills in, for a spec built elsewhere.
const (
	xhttpPadMin    = 100
	xhttpPadMax    = 1000
	xhttpMaxPost   = 1_000_000
	xhttpUserAgent = DefaultUserAgent
)

// newXHTTPConfig resolves the mode and the HTTP version and builds what
// every request shares. alpn is the tls table's ALPN (overTLS set);
// reality: the TLS layer is REALITY's, under which auto means stream-one
// (as Xray's client chooses: REALITY hides one long request best, and its
// servers are set up for it), packet-up otherwise.
func newXHTTPConfig(t spec.Transport, host string, overTLS, reality bool, alpn []string) (*xhttpConfig, error) {
	x := &xhttpConfig{mode: t.Mode, scheme: "http", host: t.Host, padMin: t.XPaddingMin, padMax: t.XPaddingMax,
		maxPost:     [2]int{t.MaxEachPostBytes, max(t.MaxEachPostBytes, t.MaxEachPostBytesMax)},
		minInterval: [2]time.Duration{t.MinPostsInterval, max(t.MinPostsInterval, t.MinPostsIntervalMax)},
		noGRPC:      t.NoGRPCHeader, mux: t.XMux}
	switch x.mode {
	case "", "auto":
		x.mode = "packet-up"
		switch {
		case reality && t.Download != nil:
			x.mode = "stream-up"
		case reality:
			x.mode = "stream-one"
		}
	case "stream-one":
		if t.Download != nil {
			return nil, errors.New("xhttp mode stream-one carries the download in its POST's answer: it takes no download settings")
		}
	case "stream-up", "packet-up":
	default:
		return nil, fmt.Errorf("unknown xhttp mode %q (expected auto, stream-one, stream-up or packet-up)", t.Mode)
	}
	h1ALPN := len(alpn) == 1 && alpn[0] == "http/1.1"
	x.h3 = overTLS && len(alpn) == 1 && alpn[0] == "h3"
	switch {
	case x.h3 && reality:
		return nil, errors.New("xhttp over HTTP/3 runs on QUIC's own TLS: it cannot run under REALITY")
	case x.h3:
		x.scheme = "https"
	case overTLS && h1ALPN && x.mode != "packet-up":
		return nil, fmt.Errorf(`xhttp mode %s needs HTTP/2, and the tls alpn is ["http/1.1"]`, x.mode)
	case overTLS:
		x.h1 = h1ALPN
		x.scheme = "https"
	default:
		x.h1 = x.mode == "packet-up"
	}
	if x.host == "" {
		x.host = host
	}
	if x.host == "" {
		return nil, errors.New("missing xhttp host")
	}
	x.host = hostHeader(x.host)
	if !printable(x.host) {
		return nil, fmt.Errorf("xhttp host %q holds a space or a control character", x.host)
	}
	p := t.Path
	if p == "" {
		p = "/"
	}
	p, x.query, _ = strings.Cut(p, "?")
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	x.path = p
	if x.padMin <= 0 || x.padMax < x.padMin {
		x.padMin, x.padMax = xhttpPadMin, xhttpPadMax
	}
	if x.maxPost[0] <= 0 {
		x.maxPost = [2]int{xhttpMaxPost, xhttpMaxPost}
	}
	x.xs = strings.Repeat("X", x.padMax)
	x.referer = (&url.URL{Scheme: x.scheme, Host: x.host, Path: x.path}).String() + "?x_padding="
	x.headers = http.Header{}
	for k, v := range t.Headers {
		x.headers.Set(k, v)
	}
	if x.headers.Get("User-Agent") == "" {
		x.headers.Set("User-Agent", xhttpUserAgent)
	}
	return x, nil
}

// alpn is the ALPN the TLS layer offers for the HTTP version.
func (x *xhttpConfig) alpn() []string {
	if x.h1 {
		return []string{"http/1.1"}
	}
	if x.h3 {
		return []string{"h3"}
	}
	return []string{"h2"}
}

// drawInt is a uniform draw from the range r (math/rand: nothing secret).
func drawInt[T ~int | ~int64](r [2]T) T {
	if r[1] <= r[0] {
		return r[0]
	}
	return r[0] + T(mrand.Int64N(int64(r[1]-r[0])+1))
}

// padding is a fresh x_padding: padMin..padMax "X"s (uniform). X has an
// 8-bit HPACK Huffman code, so the padding keeps its length on the wire.
// Its length needs no secret: math/rand draws it.
func (x *xhttpConfig) padding() string {
	n := x.padMin
	if span := x.padMax - x.padMin; span > 0 {
		n += mrand.IntN(span + 1)
	}
	return x.xs[:n]
}

// request builds one request of the flow: method on the base path with the
// given subpath (session, session/seq or none), the headers, and the
// padding in the Referer.
func (x *xhttpConfig) request(ctx context.Context, method, sub string) *http.Request {
	u := &url.URL{Scheme: x.scheme, Host: x.host, Path: x.path + sub, RawQuery: x.query}
	h := x.headers.Clone()
	h["Referer"] = []string{x.referer + x.padding()}
	req := &http.Request{
		Method:     method,
		URL:        u,
		Host:       x.host,
		Header:     h,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
	}
	return req.WithContext(ctx)
}

// grpcHeader gives a streamed POST the gRPC Content-Type, as Xray's
// client does (a CDN passes a gRPC request's body on as it comes), unless
// no_grpc_header.
func (x *xhttpConfig) grpcHeader(req *http.Request) {
	if !x.noGRPC {
		req.Header.Set("Content-Type", "application/grpc")
	}
}

// newSessionID is a random UUID (version 4), as Xray's client names a
// session.
func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

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
		x.concurrency = randBetween(m.MaxConcurrency)
		x.connections = randBetween(m.MaxConnections)
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

// xhH2 is one HTTP/2 connection, with the flows on it.
type xhH2 struct {
	x           *xhttpClient
	cc          xhCC
	raw         xhAddrs
	born        time.Time
	maxRequests int64         // the requests it serves; 0: no bound
	maxAge      time.Duration // how long it takes new flows; 0: no bound
	requests    atomic.Int64
	// answered: the server answered a flow's requests on c, so later
	// flows need not wait for their answer before they send.
	answered atomic.Bool
	closed   atomic.Bool

	// Guarded by x.mu.
	flows  int         // the flows on c now
	left   int64       // the flows c may take after these; below 0: no bound
	listed bool        // in x.conns: new flows may take it
	idle   bool        // listed without a flow: counted in x.idleN
	timer  *time.Timer // closes c once it has been without a flow xhttpIdle
}

// usable reports whether a new flow may start on c.
func (c *xhH2) usable() bool {
	return !c.closed.Load() && c.cc.Err() == nil && c.cc.Available() > 0 && c.left != 0 &&
		(c.maxRequests == 0 || c.requests.Load() < c.maxRequests) &&
		(c.maxAge == 0 || time.Since(c.born) < c.maxAge)
}

// close ends c with its streams (idempotent); no lock may be held.
func (c *xhH2) close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	x := c.x
	x.mu.Lock()
	delete(x.live, c)
	x.unlistLocked(c)
	x.mu.Unlock()
	c.cc.Close()
}

// unlistLocked takes c out of x.conns: no new flow takes it, and it closes
// when its last flow ends. x.mu is held.
func (x *xhttpClient) unlistLocked(c *xhH2) {
	if !c.listed {
		return
	}
	c.listed = false
	if i := slices.Index(x.conns, c); i >= 0 {
		x.conns = slices.Delete(x.conns, i, i+1)
	}
	x.busyLocked(c)
}

// busyLocked ends c's wait for a flow. x.mu is held.
func (x *xhttpClient) busyLocked(c *xhH2) {
	if !c.idle {
		return
	}
	c.idle = false
	c.timer.Stop()
	for i := len(x.idle) - 1; i >= 0; i-- {
		if x.idle[i] == c {
			x.idle = slices.Delete(x.idle, i, i+1)
			break
		}
	}
	x.idleN.Store(int32(len(x.idle)))
}

// idleLocked starts c's wait for its next flow. x.mu is held.
func (x *xhttpClient) idleLocked(c *xhH2) {
	if c.idle {
		return
	}
	c.idle = true
	x.idle = append(x.idle, c)
	x.idleN.Store(int32(len(x.idle)))
	if c.timer == nil {
		c.timer = time.AfterFunc(xhttpIdle, func() {
			x.mu.Lock()
			idle := c.listed && c.flows == 0
			if idle {
				x.unlistLocked(c)
			}
			x.mu.Unlock()
			if idle {
				c.close()
			}
		})
		return
	}
	c.timer.Reset(xhttpIdle)
}

func randBetween[T ~int64](r [2]T) T {
	if r[1] <= r[0] {
		return r[0]
	}
	n, err := rand.Int(rand.Reader, big.NewInt(int64(r[1]-r[0])+1))
	if err != nil {
		return r[0]
	}
	return r[0] + T(n.Int64())
}

// newMuxConn opens one HTTP/2 or HTTP/3 connection under ctx.
func (x *xhttpClient) newMuxConn(ctx context.Context) (xhCC, xhAddrs, error) {
	if x.h3 != nil {
		c, err := x.newH3Conn(ctx)
		if err != nil {
			return nil, nil, err
		}
		return c, c, nil
	}
	cc, raw, err := x.newConn(ctx)
	if err != nil {
		return nil, nil, err
	}
	return cc, raw, nil
}

// connectH2 opens a new HTTP/2 (or HTTP/3) connection under ctx, carrying flows (0 or
// 1) from the start. A listed one is in x.conns for the flows after, and
// counts toward max_connections while it connects; an unlisted one (a
// speculative dial's) is its flow's alone until list.
func (x *xhttpClient) connectH2(ctx context.Context, flows int, listed bool) (*xhH2, error) {
	if listed {
		x.mu.Lock()
		x.pending++
		x.mu.Unlock()
	}
	cc, raw, err := x.newMuxConn(ctx)
	x.mu.Lock()
	if listed {
		x.pending--
	}
	if err != nil {
		x.mu.Unlock()
		return nil, err
	}
	if x.closed {
		x.mu.Unlock()
		cc.Close()
		return nil, ErrClosed
	}
	c := &xhH2{x: x, cc: cc, raw: raw, born: time.Now(), flows: flows, left: -1,
		maxRequests: randBetween(x.requestTimes), maxAge: time.Duration(randBetween(x.reusableSecs)) * time.Second}
	if n := randBetween(x.reuseTimes); n > 0 {
		c.left = n - 1
	}
	x.live[c] = struct{}{}
	if listed {
		x.listLocked(c)
	}
	x.mu.Unlock()
	onBroken(cc, c.close)
	if err := cc.Err(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// listLocked puts c in x.conns. x.mu is held.
func (x *xhttpClient) listLocked(c *xhH2) {
	if c.listed || c.closed.Load() {
		return
	}
	c.listed = true
	x.conns = append(x.conns, c)
	if c.flows == 0 {
		x.idleLocked(c)
	}
}

// take returns a connection a new flow starts on, counted as that flow's;
// nil when the flow is to connect afresh: no connection can take another
// flow, or max_connections has not been reached. It takes the one with the
// fewest flows, the newest among those (the least likely to have been let
// go by the server), and unlists the ones that may take no more.
func (x *xhttpClient) take() *xhH2 {
	var stale []*xhH2
	defer func() {
		for _, c := range stale {
			c.close()
		}
	}()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.connections > 0 {
		// Bounded by max_connections: count only the ones that may
		// still take flows.
		for i := len(x.conns) - 1; i >= 0; i-- {
			if c := x.conns[i]; !c.usable() {
				x.unlistLocked(c)
				if c.flows == 0 {
					stale = append(stale, c)
				}
			}
		}
		if int64(len(x.conns)+x.pending) < x.connections {
			return nil
		}
	}
	// An idle connection has the fewest flows: the newest that may still
	// take one. Only when none is idle and a connection may carry more
	// than one flow are the busy ones looked at (by default none is).
	best := (*xhH2)(nil)
	for n := len(x.idle); n > 0 && best == nil; n = len(x.idle) {
		c := x.idle[n-1]
		if c.usable() {
			best = c
			break
		}
		x.unlistLocked(c)
		stale = append(stale, c)
	}
	if best == nil && x.concurrency != 1 {
		for i := len(x.conns) - 1; i >= 0; i-- {
			c := x.conns[i]
			if x.concurrency > 0 && int64(c.flows) >= x.concurrency {
				continue
			}
			if !c.usable() {
				x.unlistLocked(c)
				if c.flows == 0 {
					stale = append(stale, c)
				}
				continue
			}
			if best == nil || c.flows < best.flows {
				best = c
			}
		}
	}
	if best == nil {
		return nil
	}
	x.busyLocked(best)
	best.flows++
	if best.left > 0 {
		best.left--
	}
	return best
}

// release ends a flow's hold on c. keep false unlists c (its flow could
// not open on it: a silent or refusing server). A connection left without
// a flow waits xhttpIdle for the next, or closes: when unlisted, when it
// may take no more flows, or when xhIdleMax connections wait already.
func (x *xhttpClient) release(c *xhH2, keep bool) {
	x.mu.Lock()
	c.flows--
	if !keep {
		x.unlistLocked(c)
	}
	end := false
	if c.flows == 0 {
		end = !c.listed || x.closed || !c.usable() || int(x.idleN.Load()) >= xhIdleMax
		if end {
			x.unlistLocked(c)
		} else {
			x.idleLocked(c)
		}
	}
	x.mu.Unlock()
	if end {
		c.close()
	}
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
