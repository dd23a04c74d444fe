package config

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// dnsServer is a DNS server URL as the loader lowers it: the scheme in
// lower case, a name host in lower case, an IP in its canonical form, the
// port of the scheme filled in (left out of an https:// URL when it is
// 443), and an https:// URL's path defaulted to /dns-query.
type dnsServer struct {
	url    string
	scheme string // "" for system
	byName bool   // the host is a name: bootstrap resolves it
}

// dnsServer parses the DNS server URL written at key, recording a problem
// when it is not one.
func (l *lowerer) dnsServer(key, text string) (dnsServer, bool) {
	if text == "system" {
		return dnsServer{url: "system"}, true
	}
	scheme, rest, found := strings.Cut(text, "://")
	scheme = strings.ToLower(scheme)
	defaultPort, known := dnsPorts[scheme]
	if !found || !known {
		l.errorf(key, "%q is not a DNS server URL (udp://, tcp://, tls://, https:// or system)", text)
		return dnsServer{}, false
	}
	if strings.ContainsAny(rest, "?#") {
		l.errorf(key, "%q: a DNS server URL has no query or fragment", text)
		return dnsServer{}, false
	}
	authority, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		authority, path = rest[:i], rest[i:]
	}
	if strings.Contains(authority, "@") {
		// The user info may be a secret: the problem does not repeat it.
		l.errorf(key, "a DNS server URL has no user info (a name and \"@\" before the host)")
		return dnsServer{}, false
	}
	if path != "" && scheme != "https" {
		l.errorf(key, "%q: a %s:// server has no path", text, scheme)
		return dnsServer{}, false
	}

	host, portText, hasPort, ok := splitAuthority(authority)
	if !ok {
		l.errorf(key, "%q: an IPv6 address goes in brackets, such as \"%s://[2001:db8::1]\"", text, scheme)
		return dnsServer{}, false
	}
	port := defaultPort
	if hasPort {
		n, err := strconv.ParseUint(portText, 10, 16)
		switch {
		case err != nil:
			l.errorf(key, "%q: the port must be a number from 1 to 65535", text)
			return dnsServer{}, false
		case n == 0:
			l.errorf(key, "%q: port 0 is not a server port", text)
			return dnsServer{}, false
		}
		port = uint16(n)
	}
	s := dnsServer{scheme: scheme}
	bracketed := strings.HasPrefix(authority, "[")
	if ip, err := netip.ParseAddr(host); err == nil {
		switch {
		case ip.Zone() != "":
			l.errorf(key, "%q: zoned addresses are not supported", text)
			return dnsServer{}, false
		case bracketed != ip.Is6():
			l.errorf(key, "%q: brackets hold an IPv6 address; write an IPv4 address without them", text)
			return dnsServer{}, false
		}
		host = ip.Unmap().String()
	} else {
		switch {
		case host == "":
			l.errorf(key, "%q has no host", text)
			return dnsServer{}, false
		case bracketed || !validHostName(host):
			l.errorf(key, "%q: %q is neither an IP nor a host name", text, host)
			return dnsServer{}, false
		}
		host = strings.ToLower(host)
		s.byName = true
	}

	switch {
	case scheme != "https":
		s.url = scheme + "://" + net.JoinHostPort(host, strconv.Itoa(int(port)))
	default:
		if path == "" {
			path = defaultDoHPath
		}
		authority = host
		if strings.Contains(host, ":") {
			authority = "[" + host + "]"
		}
		if port != defaultPort {
			authority = net.JoinHostPort(host, strconv.Itoa(int(port)))
		}
		s.url = scheme + "://" + authority + path
	}
	return s, true
}

// splitAuthority splits the host[:port] of a URL; an IPv6 host is in
// brackets. ok is false for an IPv6 address without them.
func splitAuthority(a string) (host, port string, hasPort, ok bool) {
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return a, "", false, true // not an IP: refused as a host
		}
		host, after := a[1:end], a[end+1:]
		if after == "" {
			return host, "", false, true
		}
		if after[0] != ':' {
			return a, "", false, true
		}
		return host, after[1:], true, true
	}
	switch strings.Count(a, ":") {
	case 0:
		return a, "", false, true
	case 1:
		host, port, _ := strings.Cut(a, ":")
		return host, port, true, true
	}
	return "", "", false, false
}

// validHostName reports whether h is a host name a resolver can be asked
// for: letters, digits, '-', '_' and '.', at most 253 bytes.
func validHostName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return false
		}
	}
	return true
}
