package provider

// The v2rayN and Xray share links: vmess:// (base64 JSON) and the
// vless:// and trojan:// URL forms with their stream in the query.

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// vmessJSON is a v2rayN vmess link's body; numbers may be written as
// strings or numbers.
type vmessJSON struct {
	PS   flexString `json:"ps"`
	Add  flexString `json:"add"`
	Port flexString `json:"port"`
	ID   flexString `json:"id"`
	Aid  flexString `json:"aid"`
	Scy  flexString `json:"scy"`
	Net  flexString `json:"net"`
	Type flexString `json:"type"`
	Host flexString `json:"host"`
	Path flexString `json:"path"`
	TLS  flexString `json:"tls"`
	SNI  flexString `json:"sni"`
	ALPN flexString `json:"alpn"`
	FP   flexString `json:"fp"`
}

// flexString reads a JSON string, number or boolean as text.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		*f = flexString(n)
		return nil
	}
	var v bool
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New("expected a string or a number")
	}
	*f = flexString(strconv.FormatBool(v))
	return nil
}

// parseVmessLink reads vmess://base64(JSON) as v2rayN writes it.
func parseVmessLink(s string) (Node, error) {
	body := s[len("vmess://"):]
	if i := strings.IndexByte(body, '#'); i >= 0 {
		body = body[:i]
	}
	dec, ok := decodeBase64([]byte(body))
	if !ok {
		return Node{}, errors.New("vmess link: the body is not base64 (only the v2rayN JSON form is read)")
	}
	var v vmessJSON
	if err := json.Unmarshal(dec, &v); err != nil {
		return Node{}, fmt.Errorf("vmess link: bad JSON: %v", err)
	}
	server, err := hostPort(string(v.Add), string(v.Port))
	if err != nil {
		return Node{}, err
	}
	name := string(v.PS)
	if name == "" {
		name = server
	}
	if aid := strings.TrimSpace(string(v.Aid)); aid != "" && aid != "0" {
		return Node{}, fmt.Errorf("vmess alterId %s (legacy MD5 authentication) is not supported: only alterId 0", aid)
	}
	o := map[string]any{"type": "vmess", "server": server, "uuid": string(v.ID)}
	if scy := string(v.Scy); scy != "" {
		o["security"] = scy
	}
	q := url.Values{}
	q.Set("type", string(v.Net))
	q.Set("headerType", string(v.Type))
	q.Set("host", string(v.Host))
	q.Set("path", string(v.Path))
	q.Set("serviceName", string(v.Path))
	q.Set("sni", string(v.SNI))
	q.Set("alpn", string(v.ALPN))
	q.Set("fp", string(v.FP))
	if string(v.TLS) == "tls" {
		q.Set("security", "tls")
	}
	if err := streamFromQuery(o, q, hostOf(server)); err != nil {
		return Node{}, err
	}
	return Node{Name: name, Outbound: o}, nil
}

func hostOf(server string) string {
	h, _, _ := net.SplitHostPort(server)
	return h
}

// parseXrayLink reads vless:// and trojan:// in the form Xray and v2rayN
// share: the UUID or password as userinfo, the stream in the query.
func parseXrayLink(s, typ string) (Node, error) {
	u, name, server, err := parseURL(s)
	if err != nil {
		return Node{}, err
	}
	if u.User == nil || u.User.Username() == "" {
		return Node{}, fmt.Errorf("%s link: no credential before @", typ)
	}
	q := u.Query()
	o := map[string]any{"type": typ, "server": server}
	if typ == "vless" {
		o["uuid"] = u.User.Username()
		if enc := q.Get("encryption"); enc != "" && enc != "none" {
			return Node{}, fmt.Errorf("vless encryption %q is not supported", enc)
		}
		if flow := q.Get("flow"); flow != "" {
			o["flow"] = flow
		}
		if pe := q.Get("packetEncoding"); pe != "" && pe != "none" {
			o["packet_encoding"] = pe
		}
	} else {
		pw := u.User.Username()
		if p, set := u.User.Password(); set {
			pw += ":" + p
		}
		o["password"] = pw
		if q.Get("security") == "" {
			q.Set("security", "tls") // trojan is TLS unless said otherwise
		}
	}
	if err := streamFromQuery(o, q, u.Hostname()); err != nil {
		return Node{}, err
	}
	return Node{Name: name, Outbound: o}, nil
}

// streamFromQuery writes the transport and tls tables the Xray-style
// query q describes into o.
func streamFromQuery(o map[string]any, q url.Values, host string) error {
	switch sec := q.Get("security"); sec {
	case "", "none":
	case "tls", "xtls":
		t := map[string]any{}
		if sni := q.Get("sni"); sni != "" {
			t["server_name"] = sni
		} else if peer := q.Get("peer"); peer != "" {
			t["server_name"] = peer
		}
		if alpn := q.Get("alpn"); alpn != "" {
			t["alpn"] = splitList(alpn)
		}
		if fp := q.Get("fp"); fp != "" && fp != "none" {
			t["fingerprint"] = fp
		}
		if truthy(q.Get("allowInsecure")) || truthy(q.Get("insecure")) {
			t["verify"] = "insecure"
		}
		o["tls"] = t
	case "reality":
		if o["type"] != "vless" {
			return fmt.Errorf("REALITY is for vless only, not %v", o["type"])
		}
		r := map[string]any{"public_key": q.Get("pbk")}
		if sid := q.Get("sid"); sid != "" {
			r["short_id"] = sid
		}
		if sni := q.Get("sni"); sni != "" {
			r["server_name"] = sni
		}
		if fp := q.Get("fp"); fp != "" && fp != "none" {
			r["fingerprint"] = fp
		}
		if spx := q.Get("spx"); spx != "" {
			r["spider_x"] = spx
		}
		o["tls"] = map[string]any{"reality": r}
	default:
		return fmt.Errorf("security %q is not supported", sec)
	}
	tr := map[string]any{}
	switch net := q.Get("type"); net {
	case "", "tcp", "raw":
		if h := q.Get("headerType"); h != "" && h != "none" {
			return fmt.Errorf("tcp header obfuscation %q is not supported", h)
		}
		return nil
	case "ws":
		tr["type"] = "ws"
		path := q.Get("path")
		if p, ed, ok := earlyData(path); ok {
			path = p
			tr["max_early_data"] = ed
			tr["early_data_header"] = "Sec-WebSocket-Protocol"
		}
		if path != "" {
			tr["path"] = path
		}
		if h := q.Get("host"); h != "" {
			tr["host"] = h
		}
	case "httpupgrade":
		tr["type"] = "httpupgrade"
		if p := q.Get("path"); p != "" {
			tr["path"] = p
		}
		if h := q.Get("host"); h != "" {
			tr["host"] = h
		}
	case "grpc", "gun":
		tr["type"] = "grpc"
		if sn := q.Get("serviceName"); sn != "" {
			tr["service_name"] = sn
		}
		if a := q.Get("authority"); a != "" {
			tr["authority"] = a
		}
		if m := q.Get("mode"); m != "" {
			tr["mode"] = m
		}
	case "xhttp", "splithttp":
		tr["type"] = "xhttp"
		for _, k := range []string{"path", "host", "mode"} {
			if v := q.Get(k); v != "" {
				tr[k] = v
			}
		}
		if e := q.Get("extra"); e != "" {
			if err := xhttpExtra(o, tr, e); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("transport %q is not supported (switchyard has tcp, ws, grpc, httpupgrade and xhttp)", net)
	}
	o["transport"] = tr
	wsALPN(o, tr)
	xhttpH3(o, tr)
	return nil
}

// xhttpH3 drops the browser fingerprint of a TLS layer under an xhttp
// transport over HTTP/3 (alpn h3): QUIC's handshake has no browser shape,
// and the loader refuses the two together. Clients (mihomo's too) write
// client-fingerprint for every node.
func xhttpH3(o, tr map[string]any) {
	t, ok := o["tls"].(map[string]any)
	if !ok || tr["type"] != "xhttp" {
		return
	}
	if alpn, _ := t["alpn"].([]string); len(alpn) == 1 && alpn[0] == "h3" {
		delete(t, "fingerprint")
	}
}

// wsALPN keeps only http/1.1 in the ALPN of a TLS layer under a ws or
// httpupgrade transport, which run over HTTP/1.1 (as Xray does with the
// "h2,http/1.1" that v2rayN writes).
func wsALPN(o, tr map[string]any) {
	t, ok := o["tls"].(map[string]any)
	if !ok || (tr["type"] != "ws" && tr["type"] != "httpupgrade") {
		return
	}
	alpn, _ := t["alpn"].([]string)
	if len(alpn) == 0 {
		return
	}
	if slices.Contains(alpn, "http/1.1") {
		t["alpn"] = []string{"http/1.1"}
	} else {
		delete(t, "alpn")
	}
}

// earlyData splits Xray's "/path?ed=2048" into the path and the early
// data length.
func earlyData(path string) (string, int64, bool) {
	p, query, ok := strings.Cut(path, "?")
	if !ok {
		return path, 0, false
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return path, 0, false
	}
	ed, err := strconv.ParseInt(v.Get("ed"), 10, 32)
	if err != nil || ed <= 0 {
		return path, 0, false
	}
	v.Del("ed")
	if rest := v.Encode(); rest != "" {
		p += "?" + rest
	}
	return p, ed, true
}

func truthy(s string) bool { return s == "1" || strings.EqualFold(s, "true") }

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// xhttpExtra reads an xhttp link's extra (Xray's xhttpSettings beyond
// path, host and mode, as JSON) into tr. The keys only a server reads are
// left out; a key that changes what the client sends and that switchyard
// does not have refuses the link.
func xhttpExtra(o, tr map[string]any, extra string) error {
	var m map[string]any
	if err := json.Unmarshal([]byte(extra), &m); err != nil {
		return fmt.Errorf("xhttp extra is not a JSON object: %v", err)
	}
	return xhttpSettings(o, tr, m)
}

// xhttpSettings reads Xray's xhttpSettings keys beyond path, host and mode
// (an extra's) into the transport table tr of the outbound o.
func xhttpSettings(o, tr map[string]any, m map[string]any) error {
	for k, v := range m {
		switch k {
		case "noSSEHeader", "scMaxBufferedPosts", "scStreamUpServerSecs", "serverMaxHeaderBytes":
			// the server's
		case "headers":
			h, ok := v.(map[string]any)
			if !ok {
				return errors.New("xhttp extra headers is not an object")
			}
			headers := map[string]string{}
			for name, value := range h {
				headers[name] = fmt.Sprint(value)
			}
			if len(headers) > 0 {
				tr["headers"] = headers
			}
		case "noGRPCHeader":
			if b, _ := v.(bool); b {
				tr["no_grpc_header"] = true
			}
		case "xPaddingBytes":
			r, err := xrayRange(k, v)
			if err != nil {
				return err
			}
			tr["x_padding_bytes"] = r
		case "scMaxEachPostBytes", "scMinPostsIntervalMs":
			r, err := xrayRange(k, v)
			if err != nil {
				return err
			}
			key := "sc_max_each_post_bytes"
			if k == "scMinPostsIntervalMs" {
				key = "sc_min_posts_interval_ms"
			}
			tr[key] = r
		case "xmux":
			x, ok := v.(map[string]any)
			if !ok {
				return errors.New("xhttp extra xmux is not an object")
			}
			xmux := map[string]any{}
			for name, value := range x {
				key, ok := xmuxKeys[name]
				if !ok {
					return fmt.Errorf("xhttp extra xmux.%s is not supported", name)
				}
				if key == "h_keep_alive_period" {
					n, ok := value.(float64)
					if !ok || n != float64(int64(n)) {
						return fmt.Errorf("xhttp extra xmux.%s is not a whole number of seconds", name)
					}
					xmux[key] = int64(n)
					continue
				}
				r, err := xrayRange("xmux."+name, value)
				if err != nil {
					return err
				}
				xmux[key] = r
			}
			tr["xmux"] = xmux
		case "downloadSettings":
			ds, ok := v.(map[string]any)
			if !ok {
				return errors.New("xhttp extra downloadSettings is not an object")
			}
			dl, err := xhttpDownload(o, ds)
			if err != nil {
				return err
			}
			tr["download"] = dl
		default:
			return fmt.Errorf("xhttp extra %s is not supported", k)
		}
	}
	return nil
}

// xmuxKeys maps Xray's xmux keys to the xmux table's.
var xmuxKeys = map[string]string{
	"maxConcurrency": "max_concurrency", "maxConnections": "max_connections", "cMaxReuseTimes": "c_max_reuse_times",
	"hMaxRequestTimes": "h_max_request_times", "hMaxReusableSecs": "h_max_reusable_secs", "hKeepAlivePeriod": "h_keep_alive_period",
}

// xrayRange reads one of Xray's int32 ranges: a number, a string "N" or
// "MIN-MAX", or an object {"from", "to"}; as "N" or "MIN-MAX".
func xrayRange(key string, v any) (string, error) {
	whole := func(f float64) (string, bool) {
		return strconv.FormatInt(int64(f), 10), f == float64(int64(f))
	}
	switch v := v.(type) {
	case float64:
		if s, ok := whole(v); ok {
			return s, nil
		}
	case string:
		if v != "" {
			return strings.ReplaceAll(v, " ", ""), nil
		}
	case map[string]any:
		from, ok1 := v["from"].(float64)
		to, ok2 := v["to"].(float64)
		a, ok3 := whole(from)
		b, ok4 := whole(to)
		if ok1 && ok2 && ok3 && ok4 {
			if a == b {
				return a, nil
			}
			return a + "-" + b, nil
		}
	}
	return "", fmt.Errorf("xhttp extra %s is not a count or a range", key)
}

// xhttpDownload is the download table of an extra's downloadSettings ds
// (Xray's stream settings with an address and a port) for the outbound o:
// its server, its TLS layer when it names one, and its xhttp request keys.
func xhttpDownload(o, ds map[string]any) (map[string]any, error) {
	dl := map[string]any{}
	host, port, _ := net.SplitHostPort(fmt.Sprint(o["server"]))
	var settings map[string]any
	for k, v := range ds {
		switch k {
		case "address":
			host = fmt.Sprint(v)
		case "port":
			port = fmt.Sprint(v)
		case "network":
			if v != "xhttp" && v != "splithttp" {
				return nil, fmt.Errorf("xhttp downloadSettings network %v: the download runs over xhttp", v)
			}
		case "security", "tlsSettings", "realitySettings":
		case "xhttpSettings", "splithttpSettings":
			settings, _ = v.(map[string]any)
		default:
			return nil, fmt.Errorf("xhttp downloadSettings.%s is not supported", k)
		}
	}
	if _, ok := ds["address"]; ok || ds["port"] != nil {
		dl["server"] = net.JoinHostPort(host, port)
	}
	switch sec, _ := ds["security"].(string); sec {
	case "":
	case "none":
		if o["tls"] != nil {
			return nil, errors.New("xhttp downloadSettings security none under a TLS outbound is not supported: the download takes the outbound's TLS or one of its own")
		}
	case "tls":
		t := map[string]any{}
		ts, _ := ds["tlsSettings"].(map[string]any)
		if sni, _ := ts["serverName"].(string); sni != "" {
			t["server_name"] = sni
		}
		if alpn, ok := ts["alpn"].([]any); ok {
			var list []string
			for _, a := range alpn {
				list = append(list, fmt.Sprint(a))
			}
			t["alpn"] = list
		}
		if fp, _ := ts["fingerprint"].(string); fp != "" && fp != "none" {
			t["fingerprint"] = fp
		}
		if b, _ := ts["allowInsecure"].(bool); b {
			t["verify"] = "insecure"
		}
		dl["tls"] = t
	case "reality":
		rs, _ := ds["realitySettings"].(map[string]any)
		r := map[string]any{}
		for from, to := range map[string]string{"publicKey": "public_key", "password": "public_key", "shortId": "short_id",
			"serverName": "server_name", "fingerprint": "fingerprint", "spiderX": "spider_x"} {
			if v, _ := rs[from].(string); v != "" {
				r[to] = v
			}
		}
		dl["tls"] = map[string]any{"reality": r}
	default:
		return nil, fmt.Errorf("xhttp downloadSettings security %q is not supported", sec)
	}
	for _, k := range []string{"path", "host"} {
		if v, _ := settings[k].(string); v != "" {
			dl[k] = v
		}
	}
	rest := map[string]any{}
	for k, v := range settings {
		switch k {
		case "path", "host", "mode":
		case "extra":
			if e, ok := v.(map[string]any); ok {
				maps.Copy(rest, e)
			}
		default:
			rest[k] = v
		}
	}
	delete(rest, "downloadSettings")
	tr := map[string]any{}
	if err := xhttpSettings(o, tr, rest); err != nil {
		return nil, err
	}
	// The GET takes the request keys; the upload's keys are the
	// outbound's.
	for _, k := range []string{"headers", "x_padding_bytes", "xmux"} {
		if v, ok := tr[k]; ok {
			dl[k] = v
		}
	}
	return dl, nil
}
