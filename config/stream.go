package config

import (
	"encoding/base64"
	"encoding/hex"
	"maps"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"

	"switchyard/netx"
	"switchyard/spec"
)

// alpnMax is the longest ALPN protocol name (RFC 7301: one length byte).
const alpnMax = 255

// transport lowers a proxy client's transport table. tlsTable is the
// client's lowered tls table (nil without one) and host the server's host:
// they give ws and httpupgrade their default host and grpc its default
// authority. A transport type that is refused makes the keys of its own
// (path, host...) not worth reporting on top.
func (l *lowerer) transport(key string, f *fileTransport, tlsTable *spec.TLS, host string) spec.Transport {
	t := spec.Transport{Type: defaultTransport}
	if f == nil {
		return t
	}
	if f.Type != nil {
		typ, ok := l.required(key+".type", f.Type)
		switch {
		case !ok:
			return t
		case !slices.Contains(transportTypes, typ):
			l.errorf(key+".type", "unknown transport type %q", typ)
			l.refused = append(l.refused, key)
			return t
		}
		t.Type = typ
	}
	for _, name := range writtenKeys(f) {
		if name != "type" && !slices.Contains(transportKeys[t.Type], name) {
			l.errorf(key+"."+name, "%s transport has no %s", aType(t.Type), strings.ReplaceAll(name, "_", " "))
		}
	}

	defaultHost := host
	if tlsTable != nil {
		defaultHost = tlsTable.ServerName
	}
	switch t.Type {
	case "ws":
		l.ws(key, f, &t, defaultHost)
	case "httpupgrade":
		path, _, hasEd := l.httpPath(key+".path", f.Path)
		if hasEd {
			l.errorf(key+".path", `an httpupgrade transport carries no early data: take "ed=" out of the path`)
		}
		t.Path = path
		t.Host = l.httpHost(key+".host", f.Host, defaultHost)
	case "grpc":
		t.ServiceName = l.serviceName(key+".service_name", f.ServiceName)
		t.Authority = l.httpHost(key+".authority", f.Authority, defaultHost)
		t.Mode = l.enum(key+".mode", f.Mode, defaultGRPCMode, grpcModes)
	case "xhttp":
		l.xhttp(key, f, &t, tlsTable, defaultHost)
	}
	return t
}

// ws lowers the keys of a ws transport into t. Early data is set either by
// max_early_data or, in Xray's form, by an "ed=N" query in the path, which
// is taken out of the path.
func (l *lowerer) ws(key string, f *fileTransport, t *spec.Transport, defaultHost string) {
	path, ed, hasEd := l.httpPath(key+".path", f.Path)
	t.Path = path
	t.Host = l.httpHost(key+".host", f.Host, defaultHost)
	t.Headers = l.headers(key+".headers", f.Headers, wsHandshakeHeaders, "the WebSocket handshake itself")
	if hasEd {
		t.MaxEarlyData = ed
	}
	if n := f.MaxEarlyData; n != nil {
		switch {
		case hasEd:
			l.errorf(key+".max_early_data", `max_early_data and the path's "ed=" both set early data; keep one`)
		case *n < 0 || *n > math.MaxInt32:
			l.errorf(key+".max_early_data", "%d is out of range 0..%d", *n, math.MaxInt32)
		default:
			t.MaxEarlyData = int(*n)
		}
	}
	if f.EarlyDataHeader != nil {
		name, ok := l.required(key+".early_data_header", f.EarlyDataHeader)
		switch {
		case !ok:
		case t.MaxEarlyData == 0:
			l.errorf(key+".early_data_header", "an early data header has no use without early data (max_early_data is 0)")
		case !validHeaderName(name):
			l.errorf(key+".early_data_header", "%q is not an HTTP header name", name)
		default:
			t.EarlyDataHeader = name
		}
	} else if t.MaxEarlyData > 0 {
		t.EarlyDataHeader = defaultEarlyDataHeader
	}
	if t.EarlyDataHeader == "" {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		if strings.EqualFold(name, t.EarlyDataHeader) {
			l.errorf(key+".headers."+quoteKey(name), "%s carries the early data; it cannot be set in headers too", t.EarlyDataHeader)
		}
	}
}

// httpPath lowers the request path of a ws or httpupgrade transport. An
// "ed=N" query parameter is taken out of it and returned as ed; hasEd
// reports that one was there.
func (l *lowerer) httpPath(key string, v *string) (path string, ed int, hasEd bool) {
	if v == nil {
		return defaultHTTPPath, 0, false
	}
	p := *v
	switch {
	case !strings.HasPrefix(p, "/"):
		l.errorf(key, "%q must start with \"/\"", p)
		return defaultHTTPPath, 0, false
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '#' }):
		l.errorf(key, "%q: a request path is printable ASCII without spaces or \"#\" (percent-encode the rest)", p)
		return defaultHTTPPath, 0, false
	}
	base, query, found := strings.Cut(p, "?")
	if !found {
		return p, 0, false
	}
	var kept []string
	for _, param := range strings.Split(query, "&") {
		name, value, _ := strings.Cut(param, "=")
		if name != "ed" {
			kept = append(kept, param)
			continue
		}
		if hasEd {
			l.errorf(key, "%q: \"ed=\" is given twice", p)
			continue
		}
		n, err := strconv.ParseUint(value, 10, 31)
		if err != nil {
			l.errorf(key, "%q: \"ed=\" takes a number of bytes 0..%d", p, math.MaxInt32)
			continue
		}
		ed, hasEd = int(n), true
	}
	path = base
	if len(kept) > 0 {
		path += "?" + strings.Join(kept, "&")
	}
	return path, ed, hasEd
}

// httpHost lowers a ws or httpupgrade host or a grpc authority: a host name
// or an IP address, def when it is not written.
func (l *lowerer) httpHost(key string, v *string, def string) string {
	if v == nil {
		return def
	}
	h, ok := l.required(key, v)
	if !ok {
		return def
	}
	if !validHost(h) {
		l.errorf(key, "%q is not a host name or an IP address", h)
		return def
	}
	return h
}

// headers lowers the extra request headers of a ws or xhttp transport; nil
// when there are none. Names are kept as written; two that differ only in
// case are one header. The reserved ones (lowercase) are written by, as
// errors say, the transport itself.
func (l *lowerer) headers(key string, m map[string]string, reserved []string, by string) map[string]string {
	var out map[string]string
	seen := map[string]string{} // lowercase name -> the name written
	for _, name := range slices.Sorted(maps.Keys(m)) {
		hkey := key + "." + quoteKey(name)
		lower := strings.ToLower(name)
		switch {
		case !validHeaderName(name):
			l.errorf(hkey, "%q is not an HTTP header name", name)
		case !validHeaderValue(m[name]):
			l.errorf(hkey, "a header value cannot hold control characters (CR, LF, NUL...)")
		case lower == "host":
			l.errorf(hkey, "set the transport's host key instead of a Host header")
		case slices.Contains(reserved, lower):
			l.errorf(hkey, "%s is written by %s", name, by)
		case seen[lower] != "":
			l.errorf(hkey, "header %q is set twice (as %q too; header names are case-insensitive)", name, seen[lower])
		default:
			seen[lower] = name
			if out == nil {
				out = map[string]string{}
			}
			out[name] = m[name]
		}
	}
	return out
}

// validHeaderName reports whether s is an HTTP field name: a token
// (RFC 9110, section 5.1).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s can be sent as an HTTP field value: no
// control characters but horizontal tab.
func validHeaderValue(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f })
}

// serviceName lowers a grpc service name, the first part of the request
// path ("/<service_name>/Tun").
func (l *lowerer) serviceName(key string, v *string) string {
	if v == nil {
		return defaultGRPCServiceName
	}
	name, ok := l.required(key, v)
	if !ok {
		return defaultGRPCServiceName
	}
	if strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '?' || r == '#' }) {
		l.errorf(key, "%q: a gRPC service name cannot hold spaces, control characters, \"?\" or \"#\"", name)
		return defaultGRPCServiceName
	}
	return name
}

// tls lowers a proxy client's tls table; nil when it is not written. host is
// the server's host, the default server name. quic is set for a client
// over QUIC, whose handshake no fingerprint applies to.
func (l *lowerer) tls(key string, f *fileTLS, host string, quic bool) *spec.TLS {
	if f == nil {
		return nil
	}
	t := &spec.TLS{ServerName: host}
	if f.ServerName != nil {
		if name, ok := l.required(key+".server_name", f.ServerName); ok {
			if validHost(name) {
				t.ServerName = name
			} else {
				l.errorf(key+".server_name", "%q is not a host name or an IP address", name)
			}
		}
	}
	t.ALPN = l.alpn(key+".alpn", f.ALPN)
	t.Insecure = l.enum(key+".verify", f.Verify, defaultTLSVerify, tlsVerifyModes) == "insecure"
	if f.CAFile != nil {
		if path, ok := l.required(key+".ca_file", f.CAFile); ok {
			if t.Insecure {
				l.errorf(key+".ca_file", `a CA file has no use with verify = "insecure"`)
			} else {
				t.CAFile = l.absPath(key+".ca_file", path)
			}
		}
	}
	if f.Reality != nil {
		l.reality(key, f, t, quic)
		return t
	}
	if f.Fingerprint != nil {
		if quic {
			l.errorf(key+".fingerprint", "QUIC carries its own TLS handshake: a ClientHello fingerprint does not apply")
		} else {
			t.Fingerprint = l.enum(key+".fingerprint", f.Fingerprint, "", tlsFingerprints)
		}
	}
	return t
}

// reality lowers the reality table of a tls table into t: the server name
// and the fingerprint are the REALITY table's, the tls table's own keys
// that do not apply to a REALITY handshake are refused.
func (l *lowerer) reality(key string, f *fileTLS, t *spec.TLS, quic bool) {
	rkey := key + ".reality"
	if quic {
		l.errorf(rkey, "REALITY runs over TCP: it does not apply to a QUIC client")
		return
	}
	for _, k := range []struct {
		name string
		set  bool
	}{{"server_name", f.ServerName != nil}, {"fingerprint", f.Fingerprint != nil}, {"verify", f.Verify != nil}, {"ca_file", f.CAFile != nil}} {
		if k.set {
			l.errorf(key+"."+k.name, "with reality, %s does not apply to the tls table (REALITY verifies the server by its own certificate; server_name and fingerprint go inside reality)", k.name)
		}
	}
	r := f.Reality
	t.Insecure, t.CAFile = false, ""
	t.Reality = &spec.Reality{}
	if text, ok := l.required(rkey+".public_key", r.PublicKey); ok {
		b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(text, "="))
		if err != nil || len(b) != 32 {
			l.errorf(rkey+".public_key", "not an X25519 public key: expected 32 bytes in base64url (the server's \"Password\"/public key from \"xray x25519\")")
		} else {
			copy(t.Reality.PublicKey[:], b)
		}
	}
	if r.ShortID != nil {
		id := *r.ShortID
		b, err := hex.DecodeString(id)
		switch {
		case len(id) > 16:
			l.errorf(rkey+".short_id", "a short id is at most 16 hex digits; this is %d", len(id))
		case err != nil:
			l.errorf(rkey+".short_id", "not hex: a short id is an even number of hex digits, at most 16")
		default:
			copy(t.Reality.ShortID[:], b)
		}
	}
	if r.ServerName != nil {
		if name, ok := l.required(rkey+".server_name", r.ServerName); ok {
			if validHost(name) {
				t.ServerName = name
			} else {
				l.errorf(rkey+".server_name", "%q is not a host name or an IP address", name)
			}
		}
	}
	t.Fingerprint = l.enum(rkey+".fingerprint", r.Fingerprint, defaultRealityFingerprint, tlsFingerprints)
	if r.SpiderX != nil {
		switch p := *r.SpiderX; {
		case !strings.HasPrefix(p, "/"):
			l.errorf(rkey+".spider_x", "%q: a path starts with \"/\"", p)
		case strings.ContainsFunc(p, func(c rune) bool { return c <= ' ' || c == 0x7f || c == '#' }):
			l.errorf(rkey+".spider_x", "%q: a path holds no spaces, control characters or \"#\"", p)
		default:
			t.Reality.SpiderX = p
		}
	}
}

// streamALPN fills in the ALPN a transport runs on when the tls table
// leaves alpn out, and refuses a written list that is anything else: grpc
// is HTTP/2, ws and httpupgrade are HTTP/1.1 upgrades, and the stream offers
// exactly that one protocol.
func (l *lowerer) streamALPN(key, transport string, t *spec.TLS, f *fileTLS) {
	want, ok := transportALPN[transport]
	switch {
	case t == nil || !ok:
	case f.ALPN == nil:
		t.ALPN = []string{want}
	case !slices.Equal(f.ALPN, []string{want}) && transport == "grpc":
		l.errorf(key, `gRPC runs over HTTP/2: alpn is ["h2"] or left out`)
	case !slices.Equal(f.ALPN, []string{want}):
		l.errorf(key, `%s transport runs over HTTP/1.1: alpn is ["http/1.1"] or left out`, aType(transport))
	}
}

// validHost reports whether h is a host name or an IP address, without a
// port or brackets.
func validHost(h string) bool {
	_, err := netx.ParseAddr(net.JoinHostPort(h, "0"))
	return err == nil
}

func (l *lowerer) alpn(key string, vs []string) []string {
	var out []string
	eachString(key, vs, func(ekey, v string) {
		switch {
		case v == "":
			l.errorf(ekey, "must not be empty")
		case len(v) > alpnMax:
			l.errorf(ekey, "an ALPN protocol name is at most %d bytes (RFC 7301); this is %d", alpnMax, len(v))
		case slices.Contains(out, v):
			l.errorf(ekey, "duplicate ALPN protocol %q", v)
		default:
			out = append(out, v)
		}
	})
	return out
}
