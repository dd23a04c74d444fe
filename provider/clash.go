package provider

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// clashHead finds a top-level proxies key.
var clashHead = regexp.MustCompile(`(?m)^proxies\s*:`)

func isClash(text []byte) bool { return clashHead.Match(text) }

// parseClash reads the proxies list of a Clash or mihomo YAML document,
// with Clash's key names and defaults.
func parseClash(content []byte) ([]Node, []Skipped, error) {
	var doc struct {
		Proxies []yaml.Node `yaml:"proxies"`
	}
	if err := yaml.Unmarshal(content, &doc); err != nil {
		return nil, nil, fmt.Errorf("provider: bad Clash YAML: %v", err)
	}
	var nodes []Node
	var skipped []Skipped
	for i := range doc.Proxies {
		var m map[string]any
		if err := doc.Proxies[i].Decode(&m); err != nil {
			skipped = append(skipped, Skipped{Name: fmt.Sprintf("proxies[%d] (line %d)", i, doc.Proxies[i].Line), Reason: "not a mapping: " + err.Error()})
			continue
		}
		n, err := ClashProxy(m)
		if err != nil {
			name := text(m, "name")
			if name == "" {
				name = fmt.Sprintf("proxies[%d] (line %d)", i, doc.Proxies[i].Line)
			}
			skipped = append(skipped, Skipped{Name: name, Reason: err.Error()})
			continue
		}
		nodes = append(nodes, n)
	}
	return nodes, skipped, nil
}

// ClashProxy converts one decoded Clash proxy.
func ClashProxy(m map[string]any) (Node, error) {
	typ := text(m, "type")
	server, err := hostPort(text(m, "server"), text(m, "port"))
	if err != nil {
		return Node{}, err
	}
	name := text(m, "name")
	if name == "" {
		name = server
	}
	o := map[string]any{"server": server}
	if v, ok := m["udp"]; ok {
		if b, isBool := v.(bool); isBool && !b {
			o["udp"] = false
		}
	}
	host := hostOf(server)
	switch typ {
	case "ss":
		o["type"] = "shadowsocks"
		o["method"] = strings.ToLower(text(m, "cipher"))
		o["password"] = text(m, "password")
		if p := text(m, "plugin"); p != "" {
			return Node{}, fmt.Errorf("ss plugin %q is not supported", p)
		}
		if truthyAny(m["udp-over-tcp"]) {
			return Node{}, errors.New("ss udp-over-tcp is not supported")
		}
	case "vmess":
		o["type"] = "vmess"
		o["uuid"] = text(m, "uuid")
		if aid := text(m, "alterId"); aid != "" && aid != "0" {
			return Node{}, fmt.Errorf("vmess alterId %s (legacy MD5 authentication) is not supported: only alterId 0", aid)
		}
		if c := text(m, "cipher"); c != "" {
			o["security"] = c
		} else {
			o["security"] = "auto"
		}
		if truthyAny(m["global-padding"]) {
			o["global_padding"] = true
		}
		if pe := text(m, "packet-encoding"); pe != "" {
			o["packet_encoding"] = pe
		} else if truthyAny(m["xudp"]) {
			o["packet_encoding"] = "xudp"
		}
		if err := clashStream(m, o, host, truthyAny(m["tls"])); err != nil {
			return Node{}, err
		}
	case "vless":
		o["type"] = "vless"
		o["uuid"] = text(m, "uuid")
		if f := text(m, "flow"); f != "" {
			o["flow"] = f
		}
		if pe := text(m, "packet-encoding"); pe != "" {
			o["packet_encoding"] = pe
		} else if truthyAny(m["xudp"]) {
			o["packet_encoding"] = "xudp"
		}
		if err := clashStream(m, o, host, truthyAny(m["tls"])); err != nil {
			return Node{}, err
		}
	case "trojan":
		o["type"] = "trojan"
		o["password"] = text(m, "password")
		if err := clashStream(m, o, host, true); err != nil {
			return Node{}, err
		}
	case "socks5", "http":
		o["type"] = map[string]string{"socks5": "socks", "http": "http"}[typ]
		if u := text(m, "username"); u != "" || text(m, "password") != "" {
			o["username"] = u
			o["password"] = text(m, "password")
		}
		if truthyAny(m["tls"]) {
			o["tls"] = clashTLS(m)
		}
	case "hysteria2":
		if err := clashHy2(m, o); err != nil {
			return Node{}, err
		}
	case "wireguard":
		if err := clashWG(m, o); err != nil {
			return Node{}, err
		}
	case "":
		return Node{}, errors.New("the proxy has no type")
	default:
		return Node{}, fmt.Errorf("type %q is not a protocol switchyard has a client for", typ)
	}
	return Node{Name: name, Outbound: o}, nil
}

// clashStream writes the transport (network and its -opts) and, when
// withTLS, the tls table.
func clashStream(m, o map[string]any, host string, withTLS bool) error {
	if r, ok := m["reality-opts"]; ok {
		if o["type"] != "vless" {
			return fmt.Errorf("REALITY is for vless only, not %v", o["type"])
		}
		o["tls"] = map[string]any{"reality": clashReality(m, mapOf(r))}
	} else if withTLS {
		o["tls"] = clashTLS(m)
	}
	tr := map[string]any{}
	switch network := text(m, "network"); network {
	case "", "tcp":
		return nil
	case "ws":
		opts := mapOf(m["ws-opts"])
		tr["type"] = "ws"
		if truthyAny(opts["v2ray-http-upgrade"]) {
			tr["type"] = "httpupgrade"
		}
		if p := text(opts, "path"); p != "" {
			tr["path"] = p
		}
		headers := map[string]string{}
		for k, v := range mapOf(opts["headers"]) {
			if strings.EqualFold(k, "host") {
				tr["host"] = fmt.Sprint(v)
				continue
			}
			headers[k] = fmt.Sprint(v)
		}
		if len(headers) > 0 && tr["type"] == "ws" {
			tr["headers"] = headers
		}
		if ed := text(opts, "max-early-data"); ed != "" && ed != "0" && tr["type"] == "ws" {
			n, err := strconv.ParseInt(ed, 10, 32)
			if err != nil {
				return fmt.Errorf("bad ws-opts.max-early-data %q", ed)
			}
			tr["max_early_data"] = n
			if h := text(opts, "early-data-header-name"); h != "" {
				tr["early_data_header"] = h
			}
		}
	case "grpc":
		tr["type"] = "grpc"
		if sn := text(mapOf(m["grpc-opts"]), "grpc-service-name"); sn != "" {
			tr["service_name"] = sn
		}
	case "xhttp":
		opts := mapOf(m["xhttp-opts"])
		tr["type"] = "xhttp"
		if v := text(opts, "mode"); v != "" {
			tr["mode"] = v
		}
		clashXHTTP(opts, tr)
		if truthyAny(opts["no-grpc-header"]) {
			tr["no_grpc_header"] = true
		}
		for _, k := range []string{"sc-max-each-post-bytes", "sc-min-posts-interval-ms"} {
			if v := text(opts, k); v != "" {
				tr[strings.ReplaceAll(k, "-", "_")] = v
			}
		}
		if opts["download-settings"] != nil {
			dl, err := clashDownload(m, mapOf(opts["download-settings"]), withTLS)
			if err != nil {
				return err
			}
			tr["download"] = dl
		}
	default:
		return fmt.Errorf("network %q is not supported (switchyard has tcp, ws, grpc, httpupgrade and xhttp)", network)
	}
	o["transport"] = tr
	wsALPN(o, tr)
	xhttpH3(o, tr)
	return nil
}

// clashXHTTP writes the request keys of xhttp-opts (or of its
// download-settings) into the transport (or download) table t.
func clashXHTTP(opts, t map[string]any) {
	for _, k := range []string{"path", "host"} {
		if v := text(opts, k); v != "" {
			t[k] = v
		}
	}
	if h := mapOf(opts["headers"]); len(h) > 0 {
		headers := map[string]string{}
		for k, v := range h {
			headers[k] = fmt.Sprint(v)
		}
		t["headers"] = headers
	}
	if p := text(opts, "x-padding-bytes"); p != "" {
		t["x_padding_bytes"] = p
	}
	if r := mapOf(opts["reuse-settings"]); len(r) > 0 {
		xmux := map[string]any{}
		for _, k := range []string{"max-connections", "max-concurrency", "c-max-reuse-times", "h-max-request-times", "h-max-reusable-secs"} {
			if v := text(r, k); v != "" {
				xmux[strings.ReplaceAll(k, "-", "_")] = v
			}
		}
		t["xmux"] = xmux
	}
}

// clashDownloadTLS are the keys of download-settings that give the
// download a TLS layer of its own, over the proxy's.
var clashDownloadTLS = []string{"servername", "alpn", "skip-cert-verify", "client-fingerprint", "reality-opts"}

// clashDownload is the download table of xhttp-opts.download-settings ds
// of the proxy m: its server and port (each the proxy's when left out),
// its TLS keys over the proxy's, and its request keys.
func clashDownload(m, ds map[string]any, withTLS bool) (map[string]any, error) {
	for _, k := range []string{"ech-opts", "certificate", "private-key", "fingerprint"} {
		if ds[k] != nil {
			return nil, fmt.Errorf("xhttp-opts.download-settings.%s is not supported", k)
		}
	}
	if ds["tls"] != nil && truthyAny(ds["tls"]) != withTLS {
		return nil, errors.New("xhttp-opts.download-settings.tls differs from the proxy's: the download takes the proxy's TLS or none with it")
	}
	dl := map[string]any{}
	if ds["server"] != nil || ds["port"] != nil {
		server, port := text(m, "server"), text(m, "port")
		if v := text(ds, "server"); v != "" {
			server = v
		}
		if v := text(ds, "port"); v != "" {
			port = v
		}
		dl["server"] = net.JoinHostPort(server, port)
	}
	if slices.ContainsFunc(clashDownloadTLS, func(k string) bool { return ds[k] != nil }) {
		merged := maps.Clone(m)
		for _, k := range clashDownloadTLS {
			if v, ok := ds[k]; ok {
				merged[k] = v
			}
		}
		if r, ok := merged["reality-opts"]; ok {
			dl["tls"] = map[string]any{"reality": clashReality(merged, mapOf(r))}
		} else if withTLS {
			dl["tls"] = clashTLS(merged)
		}
	}
	clashXHTTP(ds, dl)
	return dl, nil
}

// clashReality is the reality table of a node with reality-opts: the
// server name and fingerprint move into it (the loader refuses them in the
// tls table next to reality).
func clashReality(m, opts map[string]any) map[string]any {
	r := map[string]any{"public_key": text(opts, "public-key")}
	if sid := text(opts, "short-id"); sid != "" {
		r["short_id"] = sid
	}
	if sni := text(m, "servername"); sni != "" {
		r["server_name"] = sni
	} else if sni := text(m, "sni"); sni != "" {
		r["server_name"] = sni
	}
	if fp := text(m, "client-fingerprint"); fp != "" {
		r["fingerprint"] = fp
	}
	return r
}

func clashTLS(m map[string]any) map[string]any {
	t := map[string]any{}
	if sni := text(m, "servername"); sni != "" {
		t["server_name"] = sni
	} else if sni := text(m, "sni"); sni != "" {
		t["server_name"] = sni
	}
	if alpn := stringList(m["alpn"]); len(alpn) > 0 {
		t["alpn"] = alpn
	}
	if truthyAny(m["skip-cert-verify"]) {
		t["verify"] = "insecure"
	}
	if fp := text(m, "client-fingerprint"); fp != "" {
		t["fingerprint"] = fp
	}
	return t
}

func clashHy2(m, o map[string]any) error {
	o["type"] = "hysteria2"
	if p := text(m, "ports"); p != "" {
		return fmt.Errorf("hysteria2 port hopping (ports %q) is not supported", p)
	}
	o["password"] = text(m, "password")
	switch obfs := text(m, "obfs"); obfs {
	case "", "none":
	case "salamander":
		o["obfs"] = map[string]any{"type": "salamander", "password": text(m, "obfs-password")}
	default:
		return fmt.Errorf("hysteria2 obfs %q is not supported", obfs)
	}
	for _, k := range []string{"up", "down"} {
		if v := text(m, k); v != "" {
			n, err := mbps(v)
			if err != nil {
				return fmt.Errorf("bad %s %q: %v", k, v, err)
			}
			o[k+"_mbps"] = n
		}
	}
	t := clashTLS(m)
	if alpn, ok := t["alpn"].([]string); ok && len(alpn) == 1 && alpn[0] == "h3" {
		delete(t, "alpn")
	}
	delete(t, "fingerprint") // QUIC: the ClientHello is quic-go's
	if len(t) > 0 {
		o["tls"] = t
	}
	return nil
}

// mbps reads Clash's bandwidth: a number of Mbps, or a number with a unit
// (bps, Kbps, Mbps, Gbps, Tbps; case-insensitive).
func mbps(v string) (int64, error) {
	v = strings.TrimSpace(v)
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := v, "mbps"
	if i >= 0 {
		num, unit = v[:i], strings.ToLower(strings.TrimSpace(v[i:]))
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 || f > 1e9 {
		return 0, errors.New("not a bandwidth")
	}
	scale := map[string]float64{"bps": 1e-6, "b": 1e-6, "kbps": 1e-3, "k": 1e-3, "mbps": 1, "m": 1, "gbps": 1e3, "g": 1e3, "tbps": 1e6, "t": 1e6}
	s, ok := scale[unit]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q", unit)
	}
	return int64(f * s), nil
}

func clashWG(m, o map[string]any) error {
	o["type"] = "wireguard"
	if _, ok := m["peers"]; ok {
		return errors.New("wireguard with a peers list is not supported: one peer per node")
	}
	if _, ok := m["amnezia-wg-option"]; ok {
		return errors.New("AmneziaWG options are not supported")
	}
	o["endpoint"] = o["server"]
	delete(o, "server")
	o["private_key"] = text(m, "private-key")
	o["peer_public_key"] = text(m, "public-key")
	if psk := text(m, "pre-shared-key"); psk != "" {
		o["preshared_key"] = psk
	}
	var addrs []string
	for _, k := range []string{"ip", "ipv6"} {
		if a := text(m, k); a != "" {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		return errors.New("wireguard: no ip")
	}
	o["addresses"] = hostPrefixes(addrs)
	if mtu := text(m, "mtu"); mtu != "" {
		n, err := strconv.ParseInt(mtu, 10, 32)
		if err != nil {
			return fmt.Errorf("wireguard: bad mtu %q", mtu)
		}
		o["mtu"] = n
	}
	if ips := stringList(m["allowed-ips"]); len(ips) > 0 {
		o["allowed_ips"] = ips
	}
	switch r := m["reserved"].(type) {
	case nil:
	case []any:
		var bs []int64
		for _, v := range r {
			n, err := strconv.ParseInt(fmt.Sprint(v), 10, 64)
			if err != nil {
				return fmt.Errorf("wireguard: bad reserved %v", r)
			}
			bs = append(bs, n)
		}
		o["reserved"] = bs
	case string:
		return errors.New("wireguard: reserved as a base64 string is not supported; write three numbers")
	default:
		return fmt.Errorf("wireguard: bad reserved %v", r)
	}
	return nil
}

// text returns m[k] written as text ("" when absent or a list/map).
func text(m map[string]any, k string) string {
	switch v := m[k].(type) {
	case nil:
		return ""
	case string:
		return v
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v)
	}
	return ""
}

func truthyAny(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return truthy(v)
	case int:
		return v == 1
	}
	return false
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

func stringList(v any) []string {
	switch v := v.(type) {
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case string:
		return splitList(v)
	}
	return nil
}
