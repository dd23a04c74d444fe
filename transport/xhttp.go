package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"switchyard/internal/slot"
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
//     counting from 0, sent sc_min_posts_interval_ms apart at the least;
//     the server puts them back in order. Over HTTP/2, or HTTP/1.1.
//
// Every request carries an x_padding of x_padding_bytes "X"s as the query
// of its Referer, which the server checks is in its range. auto is
// packet-up, as Xray's client picks it outside REALITY.
//
// HTTP/2 runs over TLS with ALPN h2, or without TLS as cleartext HTTP/2
// with prior knowledge (h2c); all the flows of an outbound share one
// connection, kept in a slot as gRPC's is. HTTP/1.1 (packet-up without
// TLS, or over TLS with alpn ["http/1.1"]) opens the GET's connection
// and one upload connection per flow, kept alive from POST to POST.
type xhttpConfig struct {
	mode        string // stream-one | stream-up | packet-up
	h1          bool   // HTTP/1.1 (packet-up only)
	scheme      string // https over TLS; http without
	host        string // Host and :authority
	path        string // the base path, ending in "/"
	query       string // the query every request carries
	headers     http.Header
	padMin      int
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
// every request shares. alpn is the tls table's ALPN (overTLS set).
func newXHTTPConfig(t spec.Transport, host string, overTLS bool, alpn []string) (*xhttpConfig, error) {
	x := &xhttpConfig{mode: t.Mode, scheme: "http", host: t.Host, padMin: t.XPaddingMin, padMax: t.XPaddingMax,
		maxPost: t.MaxEachPostBytes, minInterval: t.MinPostsInterval}
	switch x.mode {
	case "", "auto":
		x.mode = "packet-up"
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
func (x *xhttpConfig) padding() string {
	n := x.padMin
	if span := x.padMax - x.padMin; span > 0 {
		r, err := rand.Int(rand.Reader, big.NewInt(int64(span)+1))
		if err == nil {
			n += int(r.Int64())
		}
	}
	return strings.Repeat("X", n)
}

// request builds one request of the flow: method on the base path with the
// given subpath (session, session/seq or none), the headers, and the
// padding in the Referer.
func (x *xhttpConfig) request(ctx context.Context, method, sub string) *http.Request {
	u := &url.URL{Scheme: x.scheme, Host: x.host, Path: x.path + sub, RawQuery: x.query}
	h := x.headers.Clone()
	ref := url.URL{Scheme: x.scheme, Host: x.host, Path: x.path, RawQuery: "x_padding=" + x.padding()}
	h.Set("Referer", ref.String())
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

// xhttpClient is one outbound's XHTTP client: its HTTP/2 connection (in a
// slot) or, over HTTP/1.1, the way to open connections.
type xhttpClient struct {
	d   *Dialer
	cfg *xhttpConfig
	// establish bounds the connect of a packet-up upload connection
	// (HTTP/1.1), which no dial's deadline covers.
	establish time.Duration
	tr        *http.Transport
	h2        *slot.Slot[*xhH2] // nil over HTTP/1.1
}

// xhttpIdle closes a shared HTTP/2 connection that carried no request
// for this long.
const xhttpIdle = 60 * time.Second

func newXHTTPClient(d *Dialer, cfg *xhttpConfig, connect time.Duration) *xhttpClient {
	x := &xhttpClient{d: d, cfg: cfg, establish: netx.EstablishTimeout(connect)}
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
		ResponseHeaderTimeout:  0,
		MaxResponseHeaderBytes: 64 << 10,
	}
	if !cfg.h1 {
		x.h2 = slot.New(slot.Config[*xhH2]{
			Establish:  x.connectH2,
			Policy:     slot.Policy{IgnoreDeaths: true},
			Phase:      netx.PhaseTransport,
			ErrBackoff: fmt.Errorf("xhttp: the connection to %s is down, waiting before the next attempt: %w", d.server, slot.ErrBackoff),
			ErrClosed:  ErrClosed,
			OnFail: func(err error) {
				d.log.Warn(fmt.Sprintf("xhttp: connecting to %s failed: %v", d.server, err))
			},
		})
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

// xhH2 is the shared HTTP/2 connection (slot.Resource): Done closes once
// the connection is over, which its state hook tells; it closes itself
// after xhttpIdle without a request.
type xhH2 struct {
	cc     *http.ClientConn
	raw    net.Conn
	done   chan struct{}
	closed atomic.Bool
	idle   *time.Timer
}

func (x *xhttpClient) connectH2(ctx context.Context) (*xhH2, error) {
	cc, raw, err := x.newConn(ctx)
	if err != nil {
		return nil, err
	}
	c := &xhH2{cc: cc, raw: raw, done: make(chan struct{})}
	c.idle = time.AfterFunc(xhttpIdle, func() {
		if cc.InFlight() == 0 {
			c.Close()
		}
	})
	cc.SetStateHook(func(cc *http.ClientConn) {
		switch {
		case cc.Err() != nil:
			c.Close()
		case cc.InFlight() == 0:
			c.idle.Reset(xhttpIdle)
		}
	})
	if err := cc.Err(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (c *xhH2) Done() <-chan struct{} { return c.done }

// Close ends the connection with its streams (idempotent).
func (c *xhH2) Close() {
	if !c.closed.CompareAndSwap(false, true) {
		return
	}
	c.idle.Stop()
	close(c.done)
	c.cc.Close()
}

// dial opens a flow: the session's requests, returning once the download's
// response headers arrived (a server that does not answer fails the dial
// under its deadline).
func (x *xhttpClient) dial(ctx context.Context) (net.Conn, error) {
	var (
		cc      *http.ClientConn
		raw     net.Conn
		release func()
		res     *slot.Res[*xhH2]
	)
	if x.h2 != nil {
		acquire := x.h2.Acquire
		if netx.Speculative(ctx) {
			acquire = x.h2.AcquireDetached
		}
		// A connection that went away (GOAWAY) or is at the server's
		// stream limit takes no new flow: it is retired, and carries on
		// with its flows until the last ends.
		for try := 1; ; try++ {
			r, err := acquire(ctx)
			if err != nil {
				return nil, err
			}
			if r.V.cc.Err() == nil && r.V.cc.Available() > 0 {
				res, cc, raw = r, r.V.cc, r.V.raw
				break
			}
			r.Release()
			x.h2.Retire(r, false)
			if try == grpcRetries {
				return nil, fmt.Errorf("xhttp: %d connections to %s in a row took no new request", try, x.d.server)
			}
		}
		release = res.Release
	} else {
		c, rc, err := x.newConn(ctx)
		if err != nil {
			return nil, err
		}
		cc, raw = c, rc
		release = func() { c.Close() }
	}
	netx.Mark(ctx, netx.PhaseTransport)
	c, err := openXHConn(ctx, x, cc, raw, release)
	if err != nil {
		if res != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) && cc.Err() != nil {
			x.h2.Lost(res)
		}
		return nil, err
	}
	if res != nil && res.Detached() {
		c.adopt = func() { x.h2.Adopt(res) }
	}
	return c, nil
}

// close ends the shared connection with its flows and refuses later dials.
func (x *xhttpClient) close() {
	if x.h2 != nil {
		x.h2.Close()
	}
}

// purge lets the shared connection go: its flows carry on.
func (x *xhttpClient) purge() {
	if x.h2 != nil {
		x.h2.Purge()
	}
}
