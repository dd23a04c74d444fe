package provider

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// linkSchemes are the schemes a share-link list may start with; those
// without a converter are read so that their nodes are skipped by name.
var linkSchemes = map[string]bool{
	"ss": true, "vmess": true, "vless": true, "trojan": true,
	"hysteria2": true, "hy2": true, "socks5": true, "socks": true,
	"http": true, "https": true, "wireguard": true, "wg": true,
	// Read to be skipped: switchyard has no client for them.
	"ssr": true, "tuic": true, "hysteria": true, "anytls": true, "snell": true,
}

// maxLinkLen bounds one line; a longer one is skipped.
const maxLinkLen = 64 << 10

// parseLinks reads one share link a line; blank lines and lines starting
// with # are ignored.
func parseLinks(text []byte) ([]Node, []Skipped) {
	var nodes []Node
	var skipped []Skipped
	for _, line := range bytes.Split(text, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") || strings.HasPrefix(s, "//") {
			continue
		}
		n, err := ParseLink(s)
		if err != nil {
			skipped = append(skipped, Skipped{Name: linkName(s), Reason: err.Error()})
			continue
		}
		nodes = append(nodes, n)
	}
	return nodes, skipped
}

// linkName is the name of a link that could not be converted: its
// fragment, else the link up to its userinfo's end, clipped.
func linkName(s string) string {
	if _, frag, ok := strings.Cut(s, "#"); ok && frag != "" {
		if n, err := url.PathUnescape(frag); err == nil {
			return n
		}
		return frag
	}
	scheme, rest, _ := strings.Cut(s, "://")
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	if len(rest) > 64 {
		rest = rest[:64]
	}
	return scheme + "://" + rest
}

// ParseLink converts one share link.
func ParseLink(s string) (Node, error) {
	if len(s) > maxLinkLen {
		return Node{}, fmt.Errorf("the link is longer than %d bytes", maxLinkLen)
	}
	scheme, _, ok := strings.Cut(s, "://")
	if !ok {
		return Node{}, errors.New("not a share link (no scheme://)")
	}
	switch strings.ToLower(scheme) {
	case "ss":
		return parseSS(s)
	case "vmess":
		return parseVmessLink(s)
	case "vless":
		return parseXrayLink(s, "vless")
	case "trojan":
		return parseXrayLink(s, "trojan")
	case "hysteria2", "hy2":
		return parseHy2Link(s)
	case "socks5", "socks", "http", "https":
		return parsePlainLink(s)
	case "wireguard", "wg":
		return parseWGLink(s)
	case "ssr", "tuic", "hysteria", "anytls", "snell":
		return Node{}, fmt.Errorf("%s is not a protocol switchyard has a client for", scheme)
	}
	return Node{}, fmt.Errorf("unknown link scheme %q", scheme)
}

// parseURL parses s and returns the node's name from the fragment (the
// server when there is none) and its server as host:port.
func parseURL(s string) (*url.URL, string, string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, "", "", fmt.Errorf("bad link: %v", unwrapURL(err))
	}
	server, err := hostPort(u.Hostname(), u.Port())
	if err != nil {
		return nil, "", "", err
	}
	name := u.Fragment
	if name == "" {
		name = server
	}
	return u, name, server, nil
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// hostPort joins host and port (brackets for IPv6), refusing a missing
// host or a port outside 1-65535.
func hostPort(host, port string) (string, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return "", errors.New("the link has no server host")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		if port == "" {
			return "", errors.New("the link has no server port")
		}
		return "", fmt.Errorf("bad server port %q", port)
	}
	return net.JoinHostPort(host, strconv.Itoa(p)), nil
}

// parseSS reads SIP002 (ss://userinfo@host:port/?plugin=...#name, the
// userinfo base64url of method:password or percent-encoded, as SIP022
// keys are) and the legacy form ss://base64(method:password@host:port).
func parseSS(s string) (Node, error) {
	body := s[len("ss://"):]
	frag := ""
	if i := strings.IndexByte(body, '#'); i >= 0 {
		body, frag = body[:i], body[i:]
	}
	if !strings.Contains(body, "@") {
		// Legacy: the whole authority is base64.
		main, query, _ := strings.Cut(body, "?")
		main = strings.TrimSuffix(main, "/")
		dec, ok := decodeBase64([]byte(main))
		if !ok {
			return Node{}, errors.New("ss link: neither SIP002 (userinfo@host:port) nor base64 of method:password@host:port")
		}
		at := bytes.LastIndexByte(dec, '@')
		if at < 0 {
			return Node{}, errors.New("ss link: the decoded part has no @host:port")
		}
		rebuilt := "ss://" + url.PathEscape(string(dec[:at])) + "@" + string(dec[at+1:])
		if query != "" {
			rebuilt += "/?" + query
		}
		s = rebuilt + frag
	}
	u, name, server, err := parseURL(s)
	if err != nil {
		return Node{}, err
	}
	if u.User == nil {
		return Node{}, errors.New("ss link: no method and password")
	}
	method, password := u.User.Username(), ""
	if p, set := u.User.Password(); set {
		password = p
	} else if m, p, ok := strings.Cut(method, ":"); ok {
		method, password = m, p // percent-encoded whole, colon included
	} else if dec, ok := decodeBase64([]byte(method)); ok && bytes.IndexByte(dec, ':') > 0 {
		m, p, _ := strings.Cut(string(dec), ":")
		method, password = m, p
	} else {
		return Node{}, errors.New("ss link: the userinfo is neither method:password nor its base64")
	}
	if plugin := u.Query().Get("plugin"); plugin != "" {
		p, _, _ := strings.Cut(plugin, ";")
		return Node{}, fmt.Errorf("ss plugin %q is not supported", p)
	}
	return Node{Name: name, Outbound: map[string]any{
		"type": "shadowsocks", "server": server, "method": strings.ToLower(method), "password": password,
	}}, nil
}

// parseHy2Link reads hysteria2:// and hy2:// links.
func parseHy2Link(s string) (Node, error) {
	_, authority, _ := strings.Cut(s, "://")
	if i := strings.IndexAny(authority, "/?#"); i >= 0 {
		authority = authority[:i]
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		authority = authority[i+1:]
	}
	if i := strings.LastIndexByte(authority, ':'); i >= 0 && !strings.HasSuffix(authority, "]") {
		if port := authority[i+1:]; strings.ContainsAny(port, ",-") {
			return Node{}, fmt.Errorf("hysteria2 port hopping (%s) is not supported", port)
		}
	}
	u, err := url.Parse(s)
	if err != nil {
		return Node{}, fmt.Errorf("bad link: %v", unwrapURL(err))
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), "443")
	}
	u, name, server, err := parseURL(u.String())
	if err != nil {
		return Node{}, err
	}
	q := u.Query()
	if q.Get("mport") != "" {
		return Node{}, errors.New("hysteria2 port hopping (mport) is not supported")
	}
	o := map[string]any{"type": "hysteria2", "server": server}
	if u.User != nil {
		pw := u.User.Username()
		if p, set := u.User.Password(); set {
			pw += ":" + p
		}
		o["password"] = pw
	}
	switch obfs := q.Get("obfs"); obfs {
	case "", "none":
	case "salamander":
		o["obfs"] = map[string]any{"type": "salamander", "password": q.Get("obfs-password")}
	default:
		return Node{}, fmt.Errorf("hysteria2 obfs %q is not supported", obfs)
	}
	t := map[string]any{}
	if sni := q.Get("sni"); sni != "" {
		t["server_name"] = sni
	}
	if truthy(q.Get("insecure")) {
		t["verify"] = "insecure"
	}
	if q.Get("pinSHA256") != "" {
		return Node{}, errors.New("hysteria2 pinSHA256 is not supported")
	}
	if len(t) > 0 {
		o["tls"] = t
	}
	return Node{Name: name, Outbound: o}, nil
}

// parsePlainLink reads socks5://, http:// and https:// proxies with
// optional user:password.
func parsePlainLink(s string) (Node, error) {
	u, name, server, err := parseURL(s)
	if err != nil {
		return Node{}, err
	}
	typ := "socks"
	if u.Scheme == "http" || u.Scheme == "https" {
		typ = "http"
	}
	if p := strings.Trim(u.Path, "/"); p != "" {
		return Node{}, fmt.Errorf("a %s proxy link has no path (found %q)", u.Scheme, u.Path)
	}
	o := map[string]any{"type": typ, "server": server}
	if u.User != nil {
		o["username"] = u.User.Username()
		p, _ := u.User.Password()
		o["password"] = p
	}
	if u.Scheme == "https" {
		t := map[string]any{}
		if sni := u.Query().Get("sni"); sni != "" {
			t["server_name"] = sni
		}
		if truthy(u.Query().Get("insecure")) || truthy(u.Query().Get("allowInsecure")) {
			t["verify"] = "insecure"
		}
		o["tls"] = t
	}
	return Node{Name: name, Outbound: o}, nil
}

// parseWGLink reads wireguard://PRIVATEKEY@host:port?publickey=...&address=...
// as v2rayN and sing-box share it.
func parseWGLink(s string) (Node, error) {
	u, name, server, err := parseURL(s)
	if err != nil {
		return Node{}, err
	}
	if u.User == nil || u.User.Username() == "" {
		return Node{}, errors.New("wireguard link: no private key before @")
	}
	q := u.Query()
	o := map[string]any{"type": "wireguard", "endpoint": server, "private_key": u.User.Username()}
	pub := q.Get("publickey")
	if pub == "" {
		pub = q.Get("public-key")
	}
	o["peer_public_key"] = pub
	if psk := first(q, "presharedkey", "pre-shared-key", "preshared-key"); psk != "" {
		o["preshared_key"] = psk
	}
	addr := first(q, "address", "ip")
	if addr == "" {
		return Node{}, errors.New("wireguard link: no address")
	}
	o["addresses"] = hostPrefixes(splitList(addr))
	if mtu := q.Get("mtu"); mtu != "" {
		n, err := strconv.ParseInt(mtu, 10, 32)
		if err != nil {
			return Node{}, fmt.Errorf("wireguard link: bad mtu %q", mtu)
		}
		o["mtu"] = n
	}
	if r := q.Get("reserved"); r != "" {
		var bs []int64
		for _, p := range splitList(r) {
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil {
				return Node{}, fmt.Errorf("wireguard link: bad reserved %q", r)
			}
			bs = append(bs, n)
		}
		o["reserved"] = bs
	}
	return Node{Name: name, Outbound: o}, nil
}

func first(q url.Values, keys ...string) string {
	for _, k := range keys {
		if v := q.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// hostPrefixes writes bare addresses as host prefixes (/32, /128).
func hostPrefixes(vs []string) []string {
	out := make([]string, 0, len(vs))
	for _, v := range vs {
		if !strings.Contains(v, "/") {
			if strings.Contains(v, ":") {
				v += "/128"
			} else {
				v += "/32"
			}
		}
		out = append(out, v)
	}
	return out
}
