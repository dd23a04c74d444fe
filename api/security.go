package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"

	"github.com/gorilla/websocket"
)

// The API's guards, outermost first: a request without a secret configured
// must name a loopback Host (a DNS-rebinding page names its own); CORS
// answers preflights; a cross-origin request from an origin not allowed is
// refused (without a secret); then the bearer token.

// loopbackHost reports whether host (a Host header or a URL host, with or
// without a port) is a loopback name or address.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// loopbackOrigin reports whether origin is an http(s) origin on a loopback
// host.
func loopbackOrigin(origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && loopbackHost(u.Host)
}

// originAllowed says whether a cross-origin request from origin may be
// served: always with a secret (the token is what authorizes it), else a
// loopback origin or one listed.
func (s *Server) originAllowed(origin string) bool {
	if s.opts.Secret != "" {
		return true
	}
	return loopbackOrigin(origin) || slices.Contains(s.opts.AllowOrigins, origin)
}

// sameOrigin reports whether origin is the origin of the request itself.
func sameOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// guardHost refuses, without a secret, a request whose Host is not a
// loopback name or address.
func (s *Server) guardHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Secret == "" && !loopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, "Host "+r.Host+" is not a loopback name: without a secret the API answers loopback names only")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guardOrigin refuses a cross-origin request from an origin not allowed.
func (s *Server) guardOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o != "" && !sameOrigin(r, o) && !s.originAllowed(o) {
			writeError(w, http.StatusForbidden, "origin "+o+" is not allowed (add it to api.cors_allow_origins)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guardSecret asks for the bearer token: in the Authorization header, or
// in ?token= on a WebSocket upgrade (browsers cannot set headers there).
func (s *Server) guardSecret(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.opts.Secret))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Secret == "" {
			next.ServeHTTP(w, r)
			return
		}
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok && websocket.IsWebSocketUpgrade(r) {
			got, ok = r.URL.Query().Get("token"), r.URL.Query().Has("token")
		}
		h := sha256.Sum256([]byte(got))
		if !ok || subtle.ConstantTimeCompare(h[:], want[:]) != 1 {
			writeError(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		next.ServeHTTP(w, r)
	})
}
