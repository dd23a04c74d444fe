package probe

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"switchyard/netx"
)

// DefaultURL is the probe target of a delay test whose URL is empty.
const DefaultURL = "https://www.gstatic.com/generate_204"

// maxRequestTarget bounds the path and query of a probe URL, so that a
// request head always fits one HTTP/2 frame and one small write.
const maxRequestTarget = 8 << 10

// ErrBadURL is matched by the error of a probe URL that cannot be probed.
var ErrBadURL = errors.New("probe: bad URL")

// ErrMethod is matched by the error of a probe method other than HEAD or GET.
var ErrMethod = errors.New("probe: unsupported method")

// target is a probe URL as the probe sends it.
type target struct {
	https bool
	dst   netx.Addr // what the node is asked to connect to
	// authority is the Host header and the :authority pseudo-header: the
	// host as written (brackets kept around an IPv6 literal) and the port
	// only when it is not the scheme's default. Credentials never appear.
	authority string
	// path is the request target: the raw path and query, as written
	// (dot segments and percent-encoding kept), "/" when the path is
	// empty, and never the fragment.
	path string
	// serverName is the TLS server name: the host without brackets.
	serverName string
}

func (t *target) scheme() string {
	if t.https {
		return "https"
	}
	return "http"
}

func badURL(raw, why string) error {
	return fmt.Errorf("%w %q: %s", ErrBadURL, raw, why)
}

// parseTarget reads an http or https URL. It keeps the path and query byte
// for byte, so it does its own splitting rather than decoding and
// re-encoding them.
func parseTarget(raw string) (target, error) {
	var t target
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f {
			return t, badURL(raw, "spaces, control and non-ASCII characters must be percent-encoded")
		}
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	switch {
	case !ok:
		return t, badURL(raw, "expected http:// or https://")
	case strings.EqualFold(scheme, "https"):
		t.https = true
	case strings.EqualFold(scheme, "http"):
	default:
		return t, badURL(raw, "the scheme must be http or https")
	}
	if i := strings.IndexByte(rest, '#'); i >= 0 {
		rest = rest[:i] // the fragment is never sent
	}
	end := strings.IndexAny(rest, "/?")
	if end < 0 {
		end = len(rest)
	}
	authority, pathQuery := rest[:end], rest[end:]
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:] // credentials are never sent
	}

	host, port, err := splitHostPort(authority)
	if err != nil {
		return t, badURL(raw, err.Error())
	}
	defPort := uint16(80)
	if t.https {
		defPort = 443
	}
	if port == 0 {
		port = defPort
	}
	bare := strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if ip, err := netip.ParseAddr(bare); err == nil {
		t.dst = netx.Addr{IP: ip.Unmap(), Port: port}
	} else {
		a, err := netx.ParseAddr(bare + ":" + strconv.Itoa(int(port)))
		if err != nil || !a.IsName() {
			return t, badURL(raw, fmt.Sprintf("%q is neither an IP nor a host name", host))
		}
		t.dst = a
	}
	t.serverName = bare
	t.authority = host
	if port != defPort {
		t.authority = host + ":" + strconv.Itoa(int(port))
	}

	switch {
	case pathQuery == "":
		t.path = "/"
	case pathQuery[0] == '?':
		t.path = "/" + pathQuery // a query-only URL asks for /?query
	default:
		t.path = pathQuery
	}
	if len(t.path) > maxRequestTarget {
		return t, badURL(raw, fmt.Sprintf("the path and query are longer than %d bytes", maxRequestTarget))
	}
	return t, nil
}

// splitHostPort splits an authority without credentials. port is 0 when
// absent (or empty, as in "host:").
func splitHostPort(a string) (host string, port uint16, err error) {
	portText := ""
	if strings.HasPrefix(a, "[") {
		end := strings.IndexByte(a, ']')
		if end < 0 {
			return "", 0, errors.New("unclosed [ in the host")
		}
		host, rest := a[:end+1], a[end+1:]
		ip, perr := netip.ParseAddr(host[1:end])
		if perr != nil || !ip.Is6() || ip.Zone() != "" {
			return "", 0, fmt.Errorf("%s is not an IPv6 address", host)
		}
		if rest != "" {
			if rest[0] != ':' {
				return "", 0, fmt.Errorf("unexpected %q after the host", rest)
			}
			portText = rest[1:]
		}
		a = host
	} else if i := strings.IndexByte(a, ':'); i >= 0 {
		a, portText = a[:i], a[i+1:]
	}
	if a == "" {
		return "", 0, errors.New("missing host")
	}
	if portText != "" {
		n, perr := strconv.ParseUint(portText, 10, 16)
		if perr != nil || n == 0 {
			return "", 0, fmt.Errorf("port %q must be a number from 1 to 65535", portText)
		}
		port = uint16(n)
	}
	return a, port, nil
}

// parseMethod returns the method of the probe's second request: HEAD when
// method is empty, HEAD or GET in any case, and an error otherwise.
func parseMethod(method string) (string, error) {
	switch m := strings.ToUpper(method); m {
	case "":
		return "HEAD", nil
	case "HEAD", "GET":
		return m, nil
	}
	return "", fmt.Errorf("%w %q (HEAD or GET)", ErrMethod, method)
}

// userAgent is the User-Agent of every probe request.
const userAgent = "switchyard"

// appendRequest appends the HTTP/1.1 request head of method on t.
func appendRequest(b []byte, t *target, method string) []byte {
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, t.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.authority...)
	b = append(b, "\r\nUser-Agent: "+userAgent+"\r\nAccept: */*\r\n\r\n"...)
	return b
}
