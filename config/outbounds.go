package config

import (
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"switchyard/netx"
	"switchyard/spec"
)

// outbounds lowers [[outbounds]] and appends the implicit direct and block
// outbounds the file does not declare. Tags are recorded before rules and
// [route] are checked against them.
func (l *lowerer) outbounds(fs []fileOutbound) []spec.Outbound {
	var out []spec.Outbound
	for i := range fs {
		f := &fs[i]
		key := fmt.Sprintf("outbounds[%d]", i)
		var o spec.Outbound

		// The tag is recorded even when the type is refused, so that rules
		// and balancers naming it do not add a second problem.
		first := false // this is the first outbound with its tag
		if tag, ok := l.required(key+".tag", f.Tag); ok {
			if firstKey, dup := l.outboundTags[tag]; dup {
				l.errorf(key+".tag", "duplicate outbound tag %q (first declared on line %s)", tag, lineOf(firstKey))
			} else {
				l.reservedTag(key+".tag", tag)
				l.outboundTags[tag] = key + ".tag"
				first = true
			}
			o.Tag = tag
		}

		// Keys that belong to a type not accepted here (obfs, endpoint...)
		// are not reported on top of the type.
		typ, ok := l.required(key+".type", f.Type)
		if !ok {
			continue
		}
		canonical, known := outboundTypes[typ]
		if !known {
			l.errorf(key+".type", "unknown outbound type %q", typ)
			l.refused = append(l.refused, key)
			continue
		}
		o.Type = canonical
		if first {
			l.declaredTypes[o.Tag] = canonical
		}

		l.foreignKeys(key, canonical, f)
		switch canonical {
		case "direct":
			o.AddressFamily = l.enum(key+".address_family", f.AddressFamily, defaultAddressFamily, addressFamilies)
		case "block":
		case "dns":
			if !l.dnsTable {
				l.errorf(key+".type", "a dns outbound answers with the resolvers of [dns], and this file has no [dns] table")
			}
			l.dnsOutbound = true
		case "hysteria2":
			l.hysteria2(key, f, &o)
		case "wireguard":
			l.wireguard(key, f, &o)
		default:
			l.proxyClient(key, f, &o)
		}
		if f.Drain != "" && l.oneOf(key+".drain", f.Drain, drains) {
			o.Drain = spec.Drain(f.Drain)
		}
		o.UDP = defaultOutboundUDP(canonical, o.Transport.Type)
		if f.UDP != nil {
			if why := noUDP(canonical, o.Transport.Type); *f.UDP && why != "" {
				l.errorf(key+".udp", "%s", why)
			} else {
				o.UDP = *f.UDP
			}
		}
		out = append(out, o)
	}
	for _, o := range implicitOutbounds {
		if _, declared := l.outboundTags[o.Tag]; !declared {
			out = append(out, o)
		}
	}
	return out
}

// noUDP says why an outbound of typ over transport carries no datagrams, ""
// when it does: HTTP CONNECT carries none, and Shadowsocks sends its
// datagrams to the server's UDP relay beside the stream, which over a
// transport other than tcp would bypass the transport the server is
// reached through.
func noUDP(typ, transport string) string {
	switch {
	case typ == "http":
		return "http carries no datagrams (HTTP CONNECT is TCP only)"
	case typ == "shadowsocks" && transport != "" && transport != "tcp":
		return fmt.Sprintf("shadowsocks over %s transport carries no UDP (its datagrams would bypass the transport)", aType(transport))
	}
	return ""
}

// foreignKeys reports every key written on an outbound whose type does not
// take it (a uuid on a socks outbound).
func (l *lowerer) foreignKeys(key, typ string, f *fileOutbound) {
	for _, name := range writtenKeys(f) {
		if !slices.Contains(everyOutboundKeys, name) && !slices.Contains(outboundKeys[typ], name) {
			l.errorf(key+"."+name, "%s outbound has no %s", aType(typ), strings.ReplaceAll(name, "_", " "))
		}
	}
}

// aType writes an outbound or transport type with its article: "a socks",
// "an http", "an httpupgrade", "an xhttp".
func aType(typ string) string {
	if strings.HasPrefix(typ, "http") || typ == "xhttp" {
		return "an " + typ
	}
	return article(typ)
}

// proxyClient lowers the keys of a proxy client over a stream: the server,
// the protocol's own keys, and the transport and tls tables.
func (l *lowerer) proxyClient(key string, f *fileOutbound, o *spec.Outbound) {
	o.AddressFamily = l.enum(key+".address_family", f.AddressFamily, defaultAddressFamily, addressFamilies)
	host := l.server(key, f, o)
	switch o.Type {
	case "socks", "http":
		l.credentials(key, f, o)
	case "shadowsocks":
		o.Method, o.Password = l.shadowsocks(key, f)
	case "trojan":
		o.Password, _ = l.required(key+".password", f.Password)
	case "vless":
		o.UUID = l.uuid(key+".uuid", f.UUID)
		o.Flow = l.vlessFlow(key+".flow", f.Flow)
		o.PacketEncoding = l.packetEncoding(key+".packet_encoding", f.PacketEncoding)
	case "vmess":
		o.UUID = l.uuid(key+".uuid", f.UUID)
		o.Security = l.enum(key+".security", f.Security, defaultVMessSecurity, vmessSecurities)
		o.GlobalPadding = defaultGlobalPadding
		if f.GlobalPadding != nil {
			o.GlobalPadding = *f.GlobalPadding
		}
		o.PacketEncoding = l.packetEncoding(key+".packet_encoding", f.PacketEncoding)
	}
	o.TLS = l.tls(key+".tls", f.TLS, host, false)
	if o.TLS != nil && o.TLS.Reality != nil && o.Type != "vless" {
		l.errorf(key+".tls.reality", "REALITY is offered for vless outbounds only")
	}
	o.Transport = l.transport(key+".transport", f.Transport, o.TLS, host)
	if o.Transport.Type == "xhttp" && f.Transport.Download != nil {
		o.Transport.Download = l.xhttpDownload(key+".transport.download", f.Transport.Download, f.Transport, o)
	}
	if o.Transport.Type == "xhttp" && o.TLS != nil && slices.Equal(o.TLS.ALPN, []string{"h3"}) {
		// XHTTP over HTTP/3 reaches its server over UDP only.
		l.noTCPProbe[o.Tag] = true
	}
	l.streamALPN(key+".tls.alpn", o.Transport.Type, o.TLS, f.TLS)
	if o.TLS != nil && o.TLS.Reality != nil && (o.Transport.Type == "ws" || o.Transport.Type == "httpupgrade") {
		l.errorf(key+".tls.reality", "REALITY runs under the tcp and grpc transports (as Xray's servers offer it), not %s", o.Transport.Type)
	}
	if o.Flow == "xtls-rprx-vision" {
		switch {
		case o.TLS == nil:
			l.errorf(key+".flow", "the vision flow runs over TLS 1.3 or REALITY: it needs a tls table")
		case o.Transport.Type != "" && o.Transport.Type != "tcp":
			l.errorf(key+".flow", "the vision flow runs on the tcp transport, not %s", o.Transport.Type)
		}
	}
	// gRPC without a tls table runs on cleartext HTTP/2 (h2c).
	if f.TLS == nil && o.Type == "trojan" {
		l.errorf(key+".tls", "trojan needs a tls table")
	}
}

// server lowers the server of a proxy client and returns its host ("" when
// the server is missing or bad).
func (l *lowerer) server(key string, f *fileOutbound, o *spec.Outbound) (host string) {
	text, ok := l.required(key+".server", f.Server)
	if !ok {
		return ""
	}
	a, ok := l.serverAddr(key+".server", text)
	if !ok {
		return ""
	}
	o.Server = a.String()
	return a.Host()
}

// serverAddr parses a proxy server's address: a name or an IP, and a port
// other than 0.
func (l *lowerer) serverAddr(key, text string) (netx.Addr, bool) {
	a, err := netx.ParseAddr(text)
	if err != nil {
		l.errorf(key, "%v", err)
		return netx.Addr{}, false
	}
	if a.Port == 0 {
		l.errorf(key, "%q: port 0 is not a server port", text)
		return netx.Addr{}, false
	}
	return a, true
}

// credentials lowers the username and password of a socks or http client.
// They go together: both set, or both empty or left out (no
// authentication).
func (l *lowerer) credentials(key string, f *fileOutbound, o *spec.Outbound) {
	user, pass := "", ""
	if f.Username != nil {
		user = *f.Username
	}
	if f.Password != nil {
		pass = *f.Password
	}
	switch {
	case user == "" && pass == "":
		return
	case user == "":
		l.pairedKey(key+".username", f.Username, "a password")
		return
	case pass == "":
		l.pairedKey(key+".password", f.Password, "a username")
		return
	}
	if o.Type == "socks" {
		for _, c := range []struct{ name, v string }{{"username", user}, {"password", pass}} {
			if len(c.v) > socks5FieldMax {
				l.errorf(key+"."+c.name, "SOCKS5 carries at most %d bytes (RFC 1929); this is %d", socks5FieldMax, len(c.v))
			}
		}
	}
	if o.Type == "http" && strings.Contains(user, ":") {
		l.errorf(key+".username", `HTTP Basic authentication cannot carry ":" in a username`)
	}
	o.Username, o.Password = user, pass
}

// pairedKey reports the missing or empty half of a username and password.
func (l *lowerer) pairedKey(key string, v *string, other string) {
	if v == nil {
		l.errorf(key, "required key is missing (with %s)", other)
		return
	}
	l.errorf(key, "must not be empty (with %s)", other)
}

// shadowsocks lowers the method and password of a shadowsocks client.
func (l *lowerer) shadowsocks(key string, f *fileOutbound) (method, password string) {
	if m, ok := l.required(key+".method", f.Method); ok && l.oneOf(key+".method", m, shadowsocksMethods) {
		method = m
	}
	password, ok := l.required(key+".password", f.Password)
	if ok && method != "" {
		l.ss2022Keys(key+".password", method, password)
	}
	return method, password
}

// ss2022Keys checks the password of a 2022 method (others take any
// password): base64 keys separated by ":", the identity keys first and the
// user key last, each of the method's key length. The keys are secrets:
// problems say which one is wrong, never what it is.
func (l *lowerer) ss2022Keys(key, method, password string) {
	size, ok := ss2022KeyLengths[method]
	if !ok {
		return
	}
	keys := strings.Split(password, ":")
	if len(keys) > 1 && slices.Contains(ss2022SingleKey, method) {
		l.errorf(key, "%s takes the user key alone: identity keys (\"iPSK:uPSK\") need an AES method", method)
		return
	}
	for i, k := range keys {
		which := "the key"
		switch {
		case len(keys) == 1:
		case i == len(keys)-1:
			which = fmt.Sprintf("key %d of %d (the user key)", i+1, len(keys))
		default:
			which = fmt.Sprintf("key %d of %d (an identity key)", i+1, len(keys))
		}
		b, err := base64.StdEncoding.Strict().DecodeString(k)
		switch {
		case k == "":
			l.errorf(key, "%s is empty; %s takes base64 keys of %d bytes", which, method, size)
		case err != nil || strings.ContainsAny(k, "\r\n"):
			l.errorf(key, "%s is not base64 (standard alphabet, padded); make one with \"openssl rand -base64 %d\"", which, size)
		case len(b) != size:
			l.errorf(key, "%s decodes to %d bytes; %s takes %d", which, len(b), method, size)
		}
	}
}

var uuidForm = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// uuid lowers a required UUID to its lowercase 8-4-4-4-12 form. The UUID
// is a credential: a problem does not repeat it.
func (l *lowerer) uuid(key string, v *string) string {
	text, ok := l.required(key, v)
	if !ok {
		return ""
	}
	if !uuidForm.MatchString(text) {
		l.errorf(key, "not a UUID: expected 32 hex digits in the 8-4-4-4-12 form, such as \"b831381d-6324-4d53-ad4f-8cda48b30811\"")
		return ""
	}
	return strings.ToLower(text)
}

func (l *lowerer) vlessFlow(key string, v *string) string {
	if v == nil {
		return ""
	}
	switch {
	case slices.Contains(vlessFlows, *v):
		return *v
	default:
		l.errorf(key, "unknown flow %q", *v)
	}
	return ""
}

func (l *lowerer) packetEncoding(key string, v *string) string {
	switch {
	case v == nil:
	case slices.Contains(packetEncodings, *v):
		return *v
	default:
		l.errorf(key, "unknown packet encoding %q (expected %s)", *v, quotedAlternatives(packetEncodings))
	}
	return ""
}
