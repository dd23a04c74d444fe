package sniff

import "bytes"

// methods are the request methods an HTTP/1.x request head may start with.
var methods = [...]string{"GET", "POST", "HEAD", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE"}

// maxMethodLen is the length of the longest method.
const maxMethodLen = len("OPTIONS")

// HTTPHost returns the Host header of the HTTP/1.x request head at the start
// of b: a request line with a known method and version HTTP/1.0 or HTTP/1.1,
// then headers. The host is lowercased, without its port. A Host that is an
// IP literal, is missing, or is not yet in b gives ok false.
func HTTPHost(b []byte) (host string, ok bool) {
	host, r := httpHost(b)
	return host, r == found
}

func httpHost(b []byte) (string, result) {
	sp := bytes.IndexByte(b[:min(len(b), maxMethodLen+1)], ' ')
	if sp < 0 {
		if len(b) <= maxMethodLen && methodPrefix(b) {
			return "", incomplete
		}
		return "", invalid
	}
	if !knownMethod(b[:sp]) {
		return "", invalid
	}
	line, rest, ok := cutLine(b)
	if !ok {
		return "", incomplete
	}
	if !bytes.HasSuffix(line, []byte(" HTTP/1.1")) && !bytes.HasSuffix(line, []byte(" HTTP/1.0")) {
		return "", invalid
	}
	for {
		line, rest, ok = cutLine(rest)
		if !ok {
			return "", incomplete
		}
		if len(line) == 0 {
			return "", absent // end of the head, no Host
		}
		name, value, ok := bytes.Cut(line, []byte{':'})
		if !ok || !bytes.EqualFold(name, []byte("Host")) {
			continue
		}
		value = bytes.Trim(value, " \t")
		if len(value) > 0 && value[0] == '[' {
			return "", absent // an IPv6 literal
		}
		if i := bytes.IndexByte(value, ':'); i >= 0 {
			value = value[:i]
		}
		if h, ok := hostName(value); ok {
			return h, found
		}
		return "", absent
	}
}

// cutLine cuts b at its first LF; the line loses its CR.
func cutLine(b []byte) (line, rest []byte, ok bool) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, b, false
	}
	line = b[:i]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, b[i+1:], true
}

func knownMethod(m []byte) bool {
	for _, k := range methods {
		if string(m) == k {
			return true
		}
	}
	return false
}

// methodPrefix reports whether b could still become "METHOD ".
func methodPrefix(b []byte) bool {
	for _, k := range methods {
		if len(b) <= len(k) && k[:len(b)] == string(b) {
			return true
		}
	}
	return false
}
