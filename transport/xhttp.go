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
// with prior knowledge (h2c); a connection carries one flow at a time and
// is kept for the flows after it (xhttpClient). HTTP/1.1 (packet-up
// without TLS, or over TLS with alpn ["http/1.1"]) opens the GET's
// connection and one upload connection per flow, kept alive from POST to
// POST.
type xhttpConfig struct {
	mode        string // stream-one | stream-up | packet-up
	h1          bool   // HTTP/1.1 (packet-up only)
	scheme      string // https over TLS; http without
	host        string // Host and :authority
	path        string // the base path, ending in "/"
	query       string // the query every request carries
	headers     http.Header
	padMin      int
	xs          string // padMax "X"s, which every padding is a prefix of
	referer     string // the Referer up to its padding
	padMax      int
	maxPost     int
	minInterval time.Duration
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
		maxPost: t.MaxEachPostBytes, minInterval: t.MinPostsInterval}
	switch x.mode {
	case "", "auto":
		x.mode = "packet-up"
		if reality {
			x.mode = "stream-one"
		}
	case "stream-one", "stream-up", "packet-up":
	default:
		return nil, fmt.Errorf("unknown xhttp mode %q (expected auto, stream-one, stream-up or packet-up)", t.Mode)
	}
	h1ALPN := len(alpn) == 1 && alpn[0] == "http/1.1"
	switch {
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
	if x.maxPost <= 0 {
		x.maxPost = xhttpMaxPost
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
	return []string{"h2"}
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

// xhttpClient is one outbound's XHTTP client. Over HTTP/2 it keeps the
// connections no flow uses for the flows after them, as Xray's client does
// by default (xmux: one flow at a time on a connection, which serves 600 to
// 900 requests and 30 to 50 minutes): concurrent flows each have their own
// connection and its own flow-control windows; a flow that follows another
// starts without a connect or a TLS handshake. Over HTTP/1.1 every flow
// opens its connections.
type xhttpClient struct {
	d   *Dialer
	cfg *xhttpConfig
	// establish bounds the connect of a packet-up upload connection
	// (HTTP/1.1), which no dial's deadline covers.
	establish time.Duration
	tr        *http.Transport

	mu     sync.Mutex
	idle   []*xhH2            // HTTP/2 connections no flow uses, newest last
	live   map[*xhH2]struct{} // every HTTP/2 connection not closed
	closed bool
	idleN  atomic.Int32 // len(idle), read without the lock
}

const (
	// xhttpIdle closes an idle HTTP/2 connection after this long.
	xhttpIdle = 60 * time.Second
	// xhIdleMax bounds the idle HTTP/2 connections kept. A flow holds its
	// connection until its download ends, which the server may end a second
	// or two after the application is gone (its own timers; packet-up has
	// no end of upload to tell it), so flows at a high rate need as many
	// connections as that second sees flows: a bound lower than that
	// closes connections the next flows would have taken and makes them
	// pay a TLS handshake each.
	xhIdleMax = 1024
	// xhIdleTries bounds the idle connections one dial tries before it
	// connects afresh.
	xhIdleTries = 2
)

// A connection's reuse bounds, each drawn once per connection (Xray's
// hMaxRequestTimes and hMaxReusableSecs).
var (
	xhReuseRequests = [2]int64{600, 900}
	xhReuseAge      = [2]time.Duration{1800 * time.Second, 3000 * time.Second}
)

func newXHTTPClient(d *Dialer, cfg *xhttpConfig, connect time.Duration) *xhttpClient {
	x := &xhttpClient{d: d, cfg: cfg, establish: netx.EstablishTimeout(connect), live: map[*xhH2]struct{}{}}
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
		HTTP2:                  &http.HTTP2Config{SendPingTimeout: 30 * time.Second, PingTimeout: 15 * time.Second},
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

// xhH2 is one HTTP/2 connection: carrying a flow, or idle.
type xhH2 struct {
	x           *xhttpClient
	cc          *http.ClientConn
	raw         net.Conn
	born        time.Time
	maxRequests int64
	maxAge      time.Duration
	requests    atomic.Int64
	// answered: the server answered a flow's requests on c, so later
	// flows need not wait for their answer before they send.
	answered atomic.Bool
	closed   atomic.Bool
	timer    *time.Timer // while idle; guarded by x.mu
}

// reusable reports whether another flow may start on c.
func (c *xhH2) reusable() bool {
	return !c.closed.Load() && c.cc.Err() == nil && c.cc.Available() > 0 &&
		c.requests.Load() < c.maxRequests && time.Since(c.born) < c.maxAge
}

// close ends c with its streams (idempotent); no lock may be held.
func (c *xhH2) close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	x := c.x
	x.mu.Lock()
	delete(x.live, c)
	x.removeIdleLocked(c)
	x.mu.Unlock()
	c.cc.Close()
}

// removeIdleLocked takes c out of the idle list; x.mu is held.
func (x *xhttpClient) removeIdleLocked(c *xhH2) bool {
	for i, v := range x.idle {
		if v == c {
			x.idle = append(x.idle[:i], x.idle[i+1:]...)
			x.idleN.Store(int32(len(x.idle)))
			if c.timer != nil {
				c.timer.Stop()
			}
			return true
		}
	}
	return false
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

// connectH2 opens a new HTTP/2 connection under ctx.
func (x *xhttpClient) connectH2(ctx context.Context) (*xhH2, error) {
	cc, raw, err := x.newConn(ctx)
	if err != nil {
		return nil, err
	}
	c := &xhH2{x: x, cc: cc, raw: raw, born: time.Now(), maxRequests: randBetween(xhReuseRequests), maxAge: randBetween(xhReuseAge)}
	x.mu.Lock()
	if x.closed {
		x.mu.Unlock()
		cc.Close()
		return nil, ErrClosed
	}
	x.live[c] = struct{}{}
	x.mu.Unlock()
	cc.SetStateHook(func(cc *http.ClientConn) {
		if cc.Err() != nil {
			c.close()
		}
	})
	if err := cc.Err(); err != nil {
		c.close()
		return nil, err
	}
	return c, nil
}

// takeIdle returns the newest idle connection another flow may use, nil
// when there is none; it closes the stale ones it finds.
func (x *xhttpClient) takeIdle() *xhH2 {
	var stale []*xhH2
	defer func() {
		for _, c := range stale {
			c.close()
		}
	}()
	x.mu.Lock()
	defer x.mu.Unlock()
	for n := len(x.idle); n > 0; n = len(x.idle) {
		c := x.idle[n-1]
		x.idle = x.idle[:n-1]
		x.idleN.Store(int32(len(x.idle)))
		c.timer.Stop()
		if c.reusable() {
			return c
		}
		stale = append(stale, c)
	}
	return nil
}

// put keeps c for the next flow, or closes it when it may not be reused
// or enough are idle already.
func (x *xhttpClient) put(c *xhH2) {
	x.mu.Lock()
	if x.closed || !c.reusable() || len(x.idle) >= xhIdleMax {
		x.mu.Unlock()
		c.close()
		return
	}
	x.idle = append(x.idle, c)
	x.idleN.Store(int32(len(x.idle)))
	c.timer = time.AfterFunc(xhttpIdle, func() {
		x.mu.Lock()
		found := x.removeIdleLocked(c)
		x.mu.Unlock()
		if found {
			c.close()
		}
	})
	x.mu.Unlock()
}

// dial opens a flow: the session's requests, returning once the download's
// response headers arrived (a server that does not answer fails the dial
// under its deadline). Over HTTP/2 a flow's dial takes an idle connection
// when there is one: no physical connect, but the flow's requests are its
// handshake, so it takes the dial's admission permit.
func (x *xhttpClient) dial(ctx context.Context) (net.Conn, error) {
	if x.cfg.h1 {
		cc, raw, err := x.newConn(ctx)
		if err != nil {
			return nil, err
		}
		netx.Mark(ctx, netx.PhaseTransport)
		return openXHConn(ctx, x, cc, raw, nil, nil, func() { cc.Close() })
	}
	x.mu.Lock()
	closed := x.closed
	x.mu.Unlock()
	if closed {
		return nil, ErrClosed
	}
	// A dial outside an establishment (a health probe, a delay test)
	// connects afresh: it measures the path, and leaves the idle
	// connections to flows.
	for try := 0; try < xhIdleTries && netx.Establishing(ctx); try++ {
		c := x.takeIdle()
		if c == nil {
			break
		}
		if err := netx.Admit(ctx); err != nil {
			x.put(c)
			return nil, err
		}
		netx.MarkPooled(ctx)
		conn, err := x.open(ctx, c)
		if err == nil || ctx.Err() != nil {
			return conn, err
		}
		// The server may have let the connection go meanwhile: the next
		// one, or a new one.
	}
	c, err := x.connectH2(ctx)
	if err != nil {
		return nil, err
	}
	return x.open(ctx, c)
}

// open starts a flow on c. The flow gives c back for the next one when it
// ends; a speculative dial's flow does so only once committed, and closes
// it otherwise.
func (x *xhttpClient) open(ctx context.Context, c *xhH2) (net.Conn, error) {
	netx.Mark(ctx, netx.PhaseTransport)
	var keep, opened atomic.Bool
	speculative := netx.Speculative(ctx)
	// A connection whose flow failed to open (a silent or refusing
	// server) is not kept.
	release := func() {
		if !opened.Load() || speculative && !keep.Load() {
			c.close()
			return
		}
		x.put(c)
	}
	conn, err := openXHConn(ctx, x, c.cc, c.raw, &c.requests, &c.answered, release)
	if err != nil {
		return nil, err
	}
	opened.Store(true)
	if speculative {
		conn.adopt = func() { keep.Store(true) }
	}
	return conn, nil
}

// idleCount is how many HTTP/2 connections wait for a flow.
func (x *xhttpClient) idleCount() int { return int(x.idleN.Load()) }

// warm opens one HTTP/2 connection for the next flow when none is idle.
func (x *xhttpClient) warm(ctx context.Context) (bool, error) {
	if x.cfg.h1 {
		return false, ErrNothingToWarm
	}
	if x.idleCount() > 0 {
		return false, nil
	}
	c, err := x.connectH2(ctx)
	if err != nil {
		return false, err
	}
	x.put(c)
	return true, nil
}

// close ends every connection with its flows and refuses later dials.
func (x *xhttpClient) close() {
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

// purge closes the idle connections: the flows carry on, the next flow
// connects afresh.
func (x *xhttpClient) purge() {
	x.mu.Lock()
	idle := x.idle
	x.idle = nil
	x.idleN.Store(0)
	for _, c := range idle {
		c.timer.Stop()
	}
	x.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}
