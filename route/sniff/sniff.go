// Package sniff reads the first bytes a client sends and finds the domain it
// is going to. On a stream: the server name of a TLS ClientHello or the Host
// of an HTTP/1.x request (Sniff). On UDP: the server name of the ClientHello
// a QUIC v1 or v2 client sends in its Initial packets (QUIC), and the
// question name of a DNS query (DNSQuery). Routing uses it for domain and
// protocol rules on flows whose destination is an IP.
//
// Bounds: a ClientHello split over TLS records is joined up to 256 KiB. The
// QUIC sniffer decrypts at most MaxQUICInitials (16) Initial packets per
// call, reassembles their CRYPTO stream up to MaxQUICCrypto (64 KiB) in at
// most 64 disjoint pieces, and ignores what lies beyond; its working memory
// is a copy of one packet and that stream. A DNS name is at most 255 bytes.
// The stream sniffers allocate nothing but the name they return, except to
// join a ClientHello split over several records; DNSQuery allocates only the
// name; QUIC allocates its keys and buffers, and is called only on datagrams
// QUICInitial accepts.
package sniff

import (
	"net/netip"
	"strings"
)

// Protocol names, as in netx.Flow.Protocol.
const (
	ProtocolTLS  = "tls"
	ProtocolHTTP = "http"
	ProtocolQUIC = "quic"
	ProtocolDNS  = "dns"
)

// result is what a parser made of the bytes it was given.
type result uint8

const (
	found      result = iota // a name was found
	absent                   // the protocol is recognised, it names no domain
	incomplete               // a prefix of the protocol: more bytes could tell
	invalid                  // not this protocol
)

// Sniff recognises the first bytes of a stream: ("tls", server name) for a
// TLS ClientHello, ("http", host) for an HTTP/1.x request, ("", "") for
// anything else. A recognised protocol whose message names no domain (a
// ClientHello without SNI, a request whose Host is an IP) gives the protocol
// and an empty domain.
func Sniff(b []byte) (protocol, domain string) {
	switch name, r := clientHelloSNI(b); r {
	case found:
		return ProtocolTLS, name
	case absent:
		return ProtocolTLS, ""
	}
	switch host, r := httpHost(b); r {
	case found:
		return ProtocolHTTP, host
	case absent:
		return ProtocolHTTP, ""
	}
	return "", ""
}

// NeedMore reports whether b is the beginning of a ClientHello or an HTTP
// request head that more bytes would complete: a reader that has b should
// keep reading (until its own deadline) before it gives up. An empty b needs
// more.
func NeedMore(b []byte) bool {
	if _, r := clientHelloSNI(b); r == incomplete {
		return true
	}
	_, r := httpHost(b)
	return r == incomplete
}

// hostName checks and normalises a name taken from the wire: lowercase, no
// trailing dot, letters, digits, '-', '_' and '.' only, 1 to 253 bytes, not
// an IP literal. ok is false for anything else.
func hostName(raw []byte) (string, bool) {
	if n := len(raw); n > 0 && raw[n-1] == '.' {
		raw = raw[:n-1]
	}
	if len(raw) == 0 || len(raw) > 253 {
		return "", false
	}
	hasLetter := false
	for _, c := range raw {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			hasLetter = true
		case c >= '0' && c <= '9', c == '-', c == '.', c == '_':
		default:
			return "", false
		}
	}
	name := strings.ToLower(string(raw))
	if !hasLetter {
		if _, err := netip.ParseAddr(name); err == nil {
			return "", false
		}
	}
	return name, true
}
