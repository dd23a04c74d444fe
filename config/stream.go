package config

import (
	"net"
	"slices"

	"switchyard/netx"
	"switchyard/spec"
)

// alpnMax is the longest ALPN protocol name (RFC 7301: one length byte).
const alpnMax = 255

// transport lowers a proxy client's transport table. A transport type that
// is refused makes the keys of its own (path, host...) not worth reporting
// on top.
func (l *lowerer) transport(key string, f *fileTransport) spec.Transport {
	t := spec.Transport{Type: defaultTransport}
	if f == nil || f.Type == nil {
		return t
	}
	typ, ok := l.required(key+".type", f.Type)
	switch {
	case !ok:
	case slices.Contains(transportTypes, typ):
		t.Type = typ
	case slices.Contains(pendingTransportTypes, typ):
		l.errorf(key+".type", "transport type %q is not available", typ)
		l.refused = append(l.refused, key)
	default:
		l.errorf(key+".type", "unknown transport type %q", typ)
		l.refused = append(l.refused, key)
	}
	return t
}

// tls lowers a proxy client's tls table; nil when it is not written. host is
// the server's host, the default server name.
func (l *lowerer) tls(key string, f *fileTLS, host string) *spec.TLS {
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
	if f.Fingerprint != nil {
		l.errorf(key+".fingerprint", "fingerprint is not available")
	}
	return t
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
