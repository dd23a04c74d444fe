package http

import (
	"net/http"
	"net/textproto"
	"strings"
)

// hopByHop are the headers that describe one connection and are not passed
// on (RFC 9110 section 7.6.1, plus the Proxy- forms clients still send).
var hopByHop = []string{
	"Connection",
	"Proxy-Connection",
	"Keep-Alive",
	"Proxy-Authenticate",
	"Proxy-Authorization",
	"Te",
	"Trailer",
	"Transfer-Encoding",
	"Upgrade",
}

// removeHopByHop deletes the hop-by-hop headers and every header the
// Connection header names.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopByHop {
		h.Del(k)
	}
}

// hasToken reports whether a comma-separated header holds token, ignoring
// case.
func hasToken(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for f := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(textproto.TrimString(f), token) {
				return true
			}
		}
	}
	return false
}
