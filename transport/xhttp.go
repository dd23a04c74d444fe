package transport

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

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
