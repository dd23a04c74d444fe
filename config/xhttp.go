package config

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"switchyard/internal/clip"
	"switchyard/netx"
	"switchyard/spec"
)

// The xhttp transport's defaults and bounds, as Xray's client has them.
const (
	defaultXHTTPMode = "auto"
	// The x_padding of every request: 100..1000 bytes by default. The
	// server refuses a request without one, and one outside its own range.
	defaultXPaddingMin = 100
	defaultXPaddingMax = 1000
	// maxXPadding keeps the padding, carried in the Referer, well inside
	// the 8 KiB request head Xray's server takes by default.
	maxXPadding = 4096
	// defaultMaxEachPostBytes and maxMaxEachPostBytes bound the payload of
	// one packet-up POST; the server refuses one over its own bound.
	defaultMaxEachPostBytes = 1_000_000
	maxMaxEachPostBytes     = 16 << 20
	// defaultMinPostsIntervalMs is the least time between two packet-up
	// POSTs of a flow.
	defaultMinPostsIntervalMs = 30
	maxMinPostsIntervalMs     = 10_000
)

var (
	xhttpModes = []string{"auto", "stream-one", "stream-up", "packet-up"}
	// xhttpRequestHeaders are the request headers the transport writes
	// itself (lowercase); headers cannot set them.
	xhttpRequestHeaders = []string{"host", "referer", "content-length", "content-type", "transfer-encoding", "connection", "te"}
)

// xhttp lowers the keys of an xhttp transport into t. tlsTable, when the
// client has one, gets the ALPN of the HTTP version the transport runs on:
// h2 unless alpn is written as ["http/1.1"], which only packet-up can use.
func (l *lowerer) xhttp(key string, f *fileTransport, t *spec.Transport, tlsTable *spec.TLS, defaultHost string) {
	t.Path = l.xhttpPath(key+".path", f.Path)
	t.Host = l.httpHost(key+".host", f.Host, defaultHost)
	t.Headers = l.headers(key+".headers", f.Headers, xhttpRequestHeaders, "the xhttp transport itself")
	t.Mode = l.enum(key+".mode", f.Mode, defaultXHTTPMode, xhttpModes)
	t.XPaddingMin, t.XPaddingMax = l.xPadding(key+".x_padding_bytes", f.XPaddingBytes)
	packetUp := t.Mode == "packet-up" || t.Mode == "auto"

	t.MaxEachPostBytes = defaultMaxEachPostBytes
	if v := f.ScMaxEachPostBytes; v != nil {
		k := key + ".sc_max_each_post_bytes"
		if !packetUp {
			l.errorf(k, "only packet-up sends POSTs of a bounded size; mode %q streams its upload", t.Mode)
		} else if lo, hi, ok := l.boundedRange(k, v, 1, maxMaxEachPostBytes); ok {
			t.MaxEachPostBytes, t.MaxEachPostBytesMax = int(lo), int(hi)
		}
	}
	t.MinPostsInterval = defaultMinPostsIntervalMs * time.Millisecond
	if v := f.ScMinPostsIntervalMs; v != nil {
		k := key + ".sc_min_posts_interval_ms"
		if !packetUp {
			l.errorf(k, "only packet-up spaces its POSTs; mode %q streams its upload", t.Mode)
		} else if lo, hi, ok := l.boundedRange(k, v, 0, maxMinPostsIntervalMs); ok {
			t.MinPostsInterval, t.MinPostsIntervalMax = time.Duration(lo)*time.Millisecond, time.Duration(hi)*time.Millisecond
		}
	}
	if t.MaxEachPostBytesMax == t.MaxEachPostBytes {
		t.MaxEachPostBytesMax = 0
	}
	if t.MinPostsIntervalMax == t.MinPostsInterval {
		t.MinPostsIntervalMax = 0
	}

	if f.NoGRPCHeader != nil {
		if *f.NoGRPCHeader && t.Mode == "packet-up" {
			l.errorf(key+".no_grpc_header", `mode "packet-up" streams no POST: only stream-one's and stream-up's carry the gRPC Content-Type`)
		}
		t.NoGRPCHeader = *f.NoGRPCHeader
	}
	t.XMux = l.xmux(key+".xmux", f.XMux)
	l.xhttpVersion(key, f.XMux != nil, tlsTable, t.Mode, key+".mode", strings.TrimSuffix(key, ".transport")+".tls.alpn")
}

// xhttpVersion checks the HTTP version an xhttp transport (key) runs on
// under tlsTable, and fills in the table's ALPN when it is not written: h2;
// with alpn ["h3"] HTTP/3 over QUIC; with alpn ["http/1.1"] HTTP/1.1,
// which only packet-up runs on, as it does without TLS. xmux, when written, needs HTTP/2. A mode that needs
// HTTP/2 over alpn ["http/1.1"] is reported at modeKey.
func (l *lowerer) xhttpVersion(key string, xmux bool, tlsTable *spec.TLS, mode, modeKey, alpnKey string) {
	packetUp := mode == "packet-up" || mode == "auto"
	h1 := packetUp && (tlsTable == nil || slices.Equal(tlsTable.ALPN, []string{"http/1.1"}))
	if xmux && h1 {
		l.errorf(key+".xmux", "xmux shares HTTP/2 connections between flows; this transport runs packet-up over HTTP/1.1, where every flow opens its own")
	}
	if tlsTable == nil {
		return
	}
	switch {
	case len(tlsTable.ALPN) == 0:
		tlsTable.ALPN = []string{"h2"}
	case slices.Equal(tlsTable.ALPN, []string{"h2"}):
	case slices.Equal(tlsTable.ALPN, []string{"http/1.1"}) && packetUp:
	case slices.Equal(tlsTable.ALPN, []string{"http/1.1"}):
		l.errorf(modeKey, `mode %q needs HTTP/2: over alpn ["http/1.1"] only packet-up runs`, mode)
	case slices.Equal(tlsTable.ALPN, []string{"h3"}):
		switch {
		case tlsTable.Reality != nil:
			l.errorf(alpnKey, `HTTP/3 (alpn ["h3"]) runs on QUIC's own TLS handshake, which REALITY cannot shape`)
		case tlsTable.Fingerprint != "":
			l.errorf(alpnKey, `HTTP/3 (alpn ["h3"]) runs on QUIC's own TLS handshake, which has no browser fingerprint: take fingerprint out`)
		}
	default:
		l.errorf(alpnKey, `an xhttp transport runs over HTTP/2 (alpn ["h2"], the default), HTTP/3 (alpn ["h3"]) or, in packet-up mode, HTTP/1.1 (alpn ["http/1.1"])`)
	}
}

// xhttpDownload lowers an xhttp transport's download table (key) of the
// outbound o, whose transport is lowered: what the table leaves out is
// o's server, o's tls table, and the transport's path, host, headers,
// padding and xmux. The host defaults to the transport's when it was
// written, else to the download's TLS server name or server host.
func (l *lowerer) xhttpDownload(key string, f *fileXHTTPDownload, ft *fileTransport, o *spec.Outbound) *spec.XHTTPDownload {
	t := o.Transport
	if t.Mode == "stream-one" {
		l.errorf(key, `mode "stream-one" carries the download in its one POST's answer: a download table needs stream-up, packet-up or auto`)
		return nil
	}
	d := &spec.XHTTPDownload{Server: o.Server, Path: t.Path, Headers: t.Headers,
		XPaddingMin: t.XPaddingMin, XPaddingMax: t.XPaddingMax, XMux: t.XMux}
	host := ""
	if a, err := netx.ParseAddr(o.Server); err == nil {
		host = a.Host()
	}
	if f.Server != nil {
		if text, ok := l.required(key+".server", f.Server); ok {
			if a, ok := l.serverAddr(key+".server", text); ok {
				d.Server, host = a.String(), a.Host()
			}
		}
	}
	switch {
	case f.TLS != nil:
		d.TLS = l.tls(key+".tls", f.TLS, host, false)
		if d.TLS.Reality != nil && o.Type != "vless" {
			l.errorf(key+".tls.reality", "REALITY is offered for vless outbounds only")
		}
	case o.TLS != nil:
		inherited := *o.TLS
		d.TLS = &inherited
	}
	if f.Path != nil {
		d.Path = l.xhttpPath(key+".path", f.Path)
	}
	hostDefault := host
	if d.TLS != nil {
		hostDefault = d.TLS.ServerName
	}
	switch {
	case f.Host != nil:
		d.Host = l.httpHost(key+".host", f.Host, hostDefault)
	case ft.Host != nil:
		d.Host = t.Host
	default:
		d.Host = hostDefault
	}
	if f.Headers != nil {
		d.Headers = l.headers(key+".headers", f.Headers, xhttpRequestHeaders, "the xhttp transport itself")
	}
	if f.XPaddingBytes != nil {
		d.XPaddingMin, d.XPaddingMax = l.xPadding(key+".x_padding_bytes", f.XPaddingBytes)
	}
	if f.XMux != nil {
		d.XMux = l.xmux(key+".xmux", f.XMux)
	}
	l.xhttpVersion(key, f.XMux != nil, d.TLS, t.Mode, key+".tls.alpn", key+".tls.alpn")
	return d
}

// xhttpPath lowers the request path of an xhttp transport: it starts with
// "/" and may carry a query, which every request keeps.
func (l *lowerer) xhttpPath(key string, v *string) string {
	if v == nil {
		return defaultHTTPPath
	}
	p := *v
	switch {
	case !strings.HasPrefix(p, "/"):
		l.errorf(key, "%q must start with \"/\"", p)
		return defaultHTTPPath
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }):
		l.errorf(key, "%q: a request path is printable ASCII without spaces or \"#\" (percent-encode the rest)", p)
		return defaultHTTPPath
	}
	return p
}

// xPadding lowers x_padding_bytes: "N" or "MIN-MAX", 1..maxXPadding.
func (l *lowerer) xPadding(key string, v *string) (lo, hi int) {
	if v == nil {
		return defaultXPaddingMin, defaultXPaddingMax
	}
	a, b, isRange := strings.Cut(strings.TrimSpace(*v), "-")
	if !isRange {
		b = a
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	switch {
	case err1 != nil || err2 != nil:
		l.errorf(key, `%q is not a byte count or a range "MIN-MAX"`, *v)
	case lo < 1 || hi > maxXPadding || lo > hi:
		l.errorf(key, "%q: the padding is 1..%d bytes, MIN no more than MAX (the server refuses a request without padding)", *v, maxXPadding)
	default:
		return lo, hi
	}
	return defaultXPaddingMin, defaultXPaddingMax
}

// maxXMuxBound is the largest xmux bound, as Xray's int32 ranges have it;
// maxKeepAlive the longest h_keep_alive_period.
const (
	maxXMuxBound = math.MaxInt32
	maxKeepAlive = 86400
)

// xmux lowers an xhttp transport's xmux table; nil when it is not written.
// As in Xray's client, a table whose bounds are all 0 is the default, and
// a bound a written table leaves out is none.
func (l *lowerer) xmux(key string, f *fileXMux) *spec.XMux {
	if f == nil {
		return nil
	}
	m := &spec.XMux{
		MaxConcurrency:   l.xmuxBound(key+".max_concurrency", f.MaxConcurrency),
		MaxConnections:   l.xmuxBound(key+".max_connections", f.MaxConnections),
		CMaxReuseTimes:   l.xmuxBound(key+".c_max_reuse_times", f.CMaxReuseTimes),
		HMaxRequestTimes: l.xmuxBound(key+".h_max_request_times", f.HMaxRequestTimes),
		HMaxReusableSecs: l.xmuxBound(key+".h_max_reusable_secs", f.HMaxReusableSecs),
	}
	if m.MaxConcurrency[1] > 0 && m.MaxConnections[1] > 0 {
		l.errorf(key+".max_connections", "max_connections and max_concurrency exclude each other: one bounds the connections, the other the flows on each")
	}
	if n := f.HKeepAlivePeriod; n != nil {
		switch {
		case *n > maxKeepAlive:
			l.errorf(key+".h_keep_alive_period", "%d is over %d seconds (0 is the default, below 0 no ping)", *n, maxKeepAlive)
		case *n < 0:
			m.KeepAlive = -1
		default:
			m.KeepAlive = time.Duration(*n) * time.Second
		}
	}
	if *m == (spec.XMux{}) {
		return nil
	}
	return m
}

// xmuxBound lowers one xmux bound: a count, or a string "N" or "MIN-MAX",
// 0..maxXMuxBound (0: none); [0, 0] when it is not written.
func (l *lowerer) xmuxBound(key string, v any) [2]int64 {
	if v == nil {
		return [2]int64{}
	}
	lo, hi, ok := l.boundedRange(key, v, 0, maxXMuxBound)
	if !ok {
		return [2]int64{}
	}
	return [2]int64{lo, hi}
}

// boundedRange reads a count or a range (countRange) within min..max, MIN
// no more than MAX; ok false (reported) otherwise.
func (l *lowerer) boundedRange(key string, v any, min, max int64) (lo, hi int64, ok bool) {
	lo, hi, ok = l.countRange(key, v)
	if ok && (lo < min || hi > max || lo > hi) {
		l.errorf(key, "%s is out of range %d..%d (MIN no more than MAX)", rangeText(lo, hi), min, max)
		return 0, 0, false
	}
	return lo, hi, ok
}

// countRange reads a count or a range, as Xray writes them: an integer,
// or a string "N" or "MIN-MAX"; ok false (reported) for anything else.
func (l *lowerer) countRange(key string, v any) (lo, hi int64, ok bool) {
	switch v := v.(type) {
	case int64:
		return v, v, true
	case string:
		a, b, isRange := strings.Cut(strings.TrimSpace(v), "-")
		if !isRange {
			b = a
		}
		var err1, err2 error
		lo, err1 = strconv.ParseInt(strings.TrimSpace(a), 10, 64)
		hi, err2 = strconv.ParseInt(strings.TrimSpace(b), 10, 64)
		if err1 != nil || err2 != nil {
			l.errorf(key, `%q is not a count or a range "MIN-MAX"`, clip.Value(v))
			return 0, 0, false
		}
		return lo, hi, true
	}
	l.errorf(key, `must be a count or a string "N" or "MIN-MAX"`)
	return 0, 0, false
}

// rangeText writes lo..hi as "N" or "MIN-MAX".
func rangeText(lo, hi int64) string {
	if lo == hi {
		return strconv.FormatInt(lo, 10)
	}
	return strconv.FormatInt(lo, 10) + "-" + strconv.FormatInt(hi, 10)
}
