package config

import (
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"switchyard/spec"
)

// defaultAPIListen is where [api] listens when it names no address.
const defaultAPIListen = "127.0.0.1:9090"

// api lowers [api]; no table is no API.
func (l *lowerer) api(f *fileAPI) *spec.API {
	if f == nil {
		return nil
	}
	a := &spec.API{Listen: defaultAPIListen, Secret: f.Secret}
	if f.Listen != nil {
		a.Listen = *f.Listen
		host, loopback, ok := l.apiListen("api.listen", *f.Listen)
		if ok && !loopback && f.Secret == "" {
			l.errorf("api.listen", "%q listens beyond loopback without a secret: set api.secret, or listen on 127.0.0.1 or [::1]", host)
		}
	}
	if f.ExternalUI != "" {
		a.ExternalUI = l.absPath("api.external_ui", f.ExternalUI)
	}
	eachString("api.cors_allow_origins", f.CORSAllowOrigins, func(key, o string) {
		if l.origin(key, o) {
			a.AllowOrigins = append(a.AllowOrigins, o)
		}
	})
	return a
}

// apiListen checks a host:port the API listens on and says whether the host
// is a loopback name or address. The host is returned as written ("" for
// every interface).
func (l *lowerer) apiListen(key, text string) (host string, loopback, ok bool) {
	host, port, err := net.SplitHostPort(text)
	if err != nil {
		l.errorf(key, "%q is not host:port (such as \"127.0.0.1:9090\")", text)
		return "", false, false
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		l.errorf(key, "%q: the port must be a number 0..65535", text)
		return "", false, false
	}
	if host == "" {
		return text, false, true
	}
	if strings.EqualFold(host, "localhost") {
		return host, true, true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		l.errorf(key, "%q: the host must be an IP address or localhost", text)
		return "", false, false
	}
	return host, ip.Unmap().IsLoopback(), true
}

// origin checks a web origin: scheme, host and optional port, nothing else.
func (l *lowerer) origin(key, o string) bool {
	u, err := url.Parse(o)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && u.Hostname() != "" &&
		u.Path == "" && u.RawQuery == "" && u.Fragment == "" && u.User == nil {
		return true
	}
	l.errorf(key, "%q is not an origin (a scheme and a host, such as \"https://dash.example.com\")", o)
	return false
}
