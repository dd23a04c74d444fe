package transport

import (
	"bufio"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"switchyard/spec"
)

// responseBuf is the reader under an HTTP/1.1 upgrade: big enough for any
// sane response head, and it then buffers the WebSocket frame headers.
const responseBuf = 4096

// httpHead is what the two HTTP/1.1 upgrades (ws, httpupgrade) share: the
// request target, the Host and the extra headers, checked once at build.
type httpHead struct {
	path    string
	host    string
	headers [][2]string // sorted by name; User-Agent included
}

// reserved are the request headers the upgrade writes itself.
var reserved = []string{"host", "connection", "upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-accept", "sec-websocket-extensions", "content-length", "transfer-encoding"}

// newHTTPHead normalises the path ("" is "/", a missing leading slash is
// added), defaults the host, and checks every piece that goes on the wire.
func newHTTPHead(what string, t spec.Transport, path, host string) (httpHead, error) {
	h := httpHead{path: path, host: t.Host}
	if h.path == "" {
		h.path = "/"
	}
	if h.path[0] != '/' {
		h.path = "/" + h.path
	}
	if h.host == "" {
		h.host = host
	}
	if h.host == "" {
		return h, fmt.Errorf("missing %s host", what)
	}
	h.host = hostHeader(h.host)
	if !printable(h.path) {
		return h, fmt.Errorf("%s path %q holds a space or a control character", what, h.path)
	}
	if _, err := url.ParseRequestURI(h.path); err != nil {
		return h, fmt.Errorf("%s path %q is not a request target: %w", what, h.path, err)
	}
	if !printable(h.host) {
		return h, fmt.Errorf("%s host %q holds a space or a control character", what, h.host)
	}
	hasUA := false
	for name, value := range t.Headers {
		lower := strings.ToLower(name)
		switch {
		case !token(name):
			return h, fmt.Errorf("%s header name %q is not an HTTP token", what, name)
		case slices.Contains(reserved, lower):
			return h, fmt.Errorf("%s header %q is set by the transport", what, name)
		case strings.ContainsAny(value, "\r\n\x00"):
			return h, fmt.Errorf("%s header %q holds a line break", what, name)
		}
		hasUA = hasUA || lower == "user-agent"
		h.headers = append(h.headers, [2]string{name, value})
	}
	if !hasUA {
		h.headers = append(h.headers, [2]string{"User-Agent", DefaultUserAgent})
	}
	slices.SortFunc(h.headers, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
	return h, nil
}

// appendRequest appends the GET request line, Host, the extra headers and
// the upgrade headers; the caller adds its own and the blank line.
func (h *httpHead) appendRequest(b []byte) []byte {
	b = append(b, "GET "...)
	b = append(b, h.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, h.host...)
	b = append(b, "\r\n"...)
	for _, kv := range h.headers {
		b = appendHeader(b, kv[0], kv[1])
	}
	b = append(b, "Connection: Upgrade\r\nUpgrade: websocket\r\n"...)
	return b
}

func appendHeader(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, ": "...)
	b = append(b, value...)
	return append(b, "\r\n"...)
}

// readUpgrade reads the response head and requires 101 Switching Protocols
// with Upgrade: websocket and Connection: upgrade.
func readUpgrade(br *bufio.Reader, what string) (*http.Response, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, fmt.Errorf("%s handshake: reading the response: %w", what, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, fmt.Errorf("%s handshake: the server answered %q", what, resp.Status)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") || !hasToken(resp.Header.Values("Connection"), "upgrade") {
		return nil, fmt.Errorf("%s handshake: the server's 101 does not upgrade to websocket", what)
	}
	return resp, nil
}

// hasToken reports whether a comma-separated header holds token.
func hasToken(values []string, token string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(part), token) {
				return true
			}
		}
	}
	return false
}

// hostHeader is host as an HTTP Host or :authority: an IPv6 address goes
// in brackets.
func hostHeader(host string) string {
	if ip, err := netip.ParseAddr(host); err == nil && ip.Is6() {
		return "[" + host + "]"
	}
	return host
}

// printable reports whether s is non-empty visible ASCII (no space).
func printable(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// token reports whether s is an HTTP token (RFC 9110 5.6.2).
func token(s string) bool {
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
