package dns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// Kind is the protocol of a DNS server.
type Kind uint8

const (
	System Kind = iota // the operating system's resolver
	UDP                // udp://host[:53]
	TCP                // tcp://host[:53]
	TLS                // tls://host[:853], DNS over TLS (RFC 7858)
	HTTPS              // https://host[:443][/path], DNS over HTTPS (RFC 8484)
)

var kindNames = [...]string{System: "system", UDP: "udp", TCP: "tcp", TLS: "tls", HTTPS: "https"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Default ports and the DoH path used when a URL has none.
const (
	DefaultPort    = 53
	DefaultTLSPort = 853
	DefaultDoHPort = 443
	DefaultDoHPath = "/dns-query"
)

// Server is a parsed server URL. Host is an IP address or a name; a name
// is resolved by the bootstrap resolver before the first query (and is the
// TLS server name of tls and https).
type Server struct {
	URL  string // as given; errors and logs name it
	Kind Kind
	Host string // without brackets; "" for system
	Port uint16
	Path string // https only: the path and query, "/dns-query" when none
}

// IP is the server's address when the URL gives one.
func (s Server) IP() (netip.Addr, bool) {
	ip, err := netip.ParseAddr(s.Host)
	return ip.Unmap(), err == nil
}

// String is the server in canonical form: scheme, host, explicit port and,
// for https, the path.
func (s Server) String() string {
	if s.Kind == System {
		return "system"
	}
	u := s.Kind.String() + "://" + net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port)))
	if s.Kind == HTTPS {
		u += s.Path
	}
	return u
}

// ErrBadServer is matched by every error of ParseServer.
var ErrBadServer = errors.New("bad DNS server")

type serverError struct {
	url, why string
}

func (e *serverError) Error() string {
	return fmt.Sprintf("dns server %q: %s", e.url, e.why)
}
func (e *serverError) Is(t error) bool { return t == ErrBadServer }

// ParseServer parses a server URL: "system", "udp://host[:port]",
// "tcp://host[:port]", "tls://host[:port]" or "https://host[:port][/path]".
// The host is an IP (an IPv6 one in brackets) or a host name.
func ParseServer(s string) (Server, error) {
	bad := func(why string, args ...any) (Server, error) {
		return Server{}, &serverError{url: s, why: fmt.Sprintf(why, args...)}
	}
	if s == "system" {
		return Server{URL: s, Kind: System}, nil
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return bad(`expected "system" or a URL udp://, tcp://, tls:// or https://`)
	}
	srv := Server{URL: s}
	switch strings.ToLower(scheme) {
	case "udp":
		srv.Kind, srv.Port = UDP, DefaultPort
	case "tcp":
		srv.Kind, srv.Port = TCP, DefaultPort
	case "tls":
		srv.Kind, srv.Port = TLS, DefaultTLSPort
	case "https":
		srv.Kind, srv.Port = HTTPS, DefaultDoHPort
	default:
		return bad("unknown scheme %q (expected udp, tcp, tls or https)", scheme)
	}
	u, err := url.Parse("x://" + rest)
	if err != nil {
		return bad("%v", unwrapURLError(err))
	}
	switch {
	case u.User != nil:
		return bad("a user name or password is not allowed")
	case u.Fragment != "" || strings.Contains(rest, "#"):
		return bad("a fragment is not allowed")
	case u.Opaque != "":
		return bad("missing host")
	}
	host := u.Hostname()
	if host == "" {
		return bad("missing host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return bad("port %q must be a number from 1 to 65535", p)
		}
		srv.Port = uint16(n)
	} else if strings.HasSuffix(u.Host, ":") {
		return bad("empty port")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return bad("zoned addresses are not supported")
		}
		if strings.Contains(u.Host, "[") != ip.Is6() || ip.Is4In6() {
			return bad("an IPv6 address must be in brackets, an IPv4 one not")
		}
		srv.Host = ip.String()
	} else {
		if strings.Contains(u.Host, "[") || !validHostName(host) {
			return bad("%q is neither an IP nor a host name", host)
		}
		srv.Host = strings.ToLower(strings.TrimSuffix(host, "."))
	}
	if srv.Kind == HTTPS {
		srv.Path = u.EscapedPath()
		if srv.Path == "" {
			srv.Path = DefaultDoHPath
		}
		if u.RawQuery != "" {
			srv.Path += "?" + u.RawQuery
		}
	} else if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery {
		return bad("a path or query is only allowed for https")
	}
	return srv, nil
}

// validHostName reports whether h is a host name of letters, digits,
// hyphens and underscores in dot-separated labels of 1 to 63 bytes, 253 at
// most in all (a final dot allowed).
func validHostName(h string) bool {
	h = strings.TrimSuffix(h, ".")
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			default:
				return false
			}
		}
	}
	return true
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
