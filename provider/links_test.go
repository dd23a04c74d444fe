package provider

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// Edge cases per scheme: what one link converts to (server, name and one
// key) or why it is refused.
func TestLinkEdgeCases(t *testing.T) {
	vm := func(json string) string { return "vmess://" + base64.RawURLEncoding.EncodeToString([]byte(json)) }
	tests := []struct {
		link, name, server, key, value, err string
	}{
		{link: "ss://YWVzLTEyOC1nY206cHc=@[::1]:8388#%E4%B8%AD%20%231", name: "中 #1", server: "[::1]:8388", key: "method", value: "aes-128-gcm"},
		{link: "ss://aes-128-gcm:pw@h.example:8388", name: "h.example:8388", server: "h.example:8388", key: "password", value: "pw"},
		{link: "ss://YWVzLTEyOC1nY206cHc@h:1/?plugin=obfs-local%3Bobfs%3Dhttp", err: `ss plugin "obfs-local" is not supported`},
		{link: "ss://YWVzLTEyOC1nY206cHc@h:70000", err: `bad server port "70000"`},
		{link: "ss://@:1", err: "no server host"},
		{link: vm(`{"ps":"n","add":"2001:db8::5","port":"8443","id":"u","aid":0,"net":"grpc","path":"svc","tls":"tls"}`), name: "n", server: "[2001:db8::5]:8443", key: "transport", value: "map[service_name:svc type:grpc]"},
		{link: vm(`{"add":"h","port":1,"id":"u","net":"tcp","type":"http"}`), err: `tcp header obfuscation "http"`},
		{link: vm(`{"add":"h","port":1,"id":"u","net":"kcp"}`), err: `transport "kcp" is not supported`},
		{link: "vmess://not base64!", err: "not base64"},
		{link: "vless://u@h:443?encryption=aes#x", err: `vless encryption "aes"`},
		{link: "vless://u@h:443?type=httpupgrade&path=%2Fup&host=cdn#x", name: "x", key: "transport", value: "map[host:cdn path:/up type:httpupgrade]"},
		{link: "vless://u@h:443?type=xhttp&path=%2Fxh&mode=stream-up&extra=" + url.QueryEscape(`{"xPaddingBytes":"200-900","noGRPCHeader":true,"noSSEHeader":true,"headers":{"X-A":"1"},"xmux":{"maxConcurrency":"4-8","hMaxReusableSecs":{"from":60,"to":120},"hKeepAlivePeriod":10}}`) + "#x",
			name: "x", key: "transport", value: "map[headers:map[X-A:1] mode:stream-up no_grpc_header:true path:/xh type:xhttp x_padding_bytes:200-900 xmux:map[h_keep_alive_period:10 h_max_reusable_secs:60-120 max_concurrency:4-8]]"},
		{link: "vless://u@h:443?type=xhttp&mode=packet-up&extra=" + url.QueryEscape(`{"scMaxEachPostBytes":500000,"scMinPostsIntervalMs":"10"}`) + "#x",
			name: "x", key: "transport", value: "map[mode:packet-up sc_max_each_post_bytes:500000 sc_min_posts_interval_ms:10 type:xhttp]"},
		{link: "vless://u@h:443?security=tls&sni=h&type=xhttp&mode=stream-up&extra=" + url.QueryEscape(`{"downloadSettings":{"address":"d.example","port":8443,"network":"xhttp","security":"tls","tlsSettings":{"serverName":"d.example","fingerprint":"chrome"},"xhttpSettings":{"path":"/dl","extra":{"xmux":{"maxConcurrency":2}}}}}`) + "#x",
			name: "x", key: "transport", value: "map[download:map[path:/dl server:d.example:8443 tls:map[fingerprint:chrome server_name:d.example] xmux:map[max_concurrency:2]] mode:stream-up type:xhttp]"},
		{link: "vless://u@h:443?type=xhttp&extra=" + url.QueryEscape(`{"downloadSettings":{"address":"d","sockopt":{"mark":1}}}`), err: "downloadSettings.sockopt is not supported"},
		{link: "vless://u@h:443?security=tls&type=xhttp&extra=" + url.QueryEscape(`{"downloadSettings":{"security":"none"}}`), err: "security none under a TLS outbound is not supported"},
		{link: "vless://u@h:443?type=xhttp&extra=" + url.QueryEscape(`{"xPaddingObfsMode":true}`), err: "xhttp extra xPaddingObfsMode is not supported"},
		{link: "vless://u@h:443?type=xhttp&mode=packet-up&extra=" + url.QueryEscape(`{"scMinPostsIntervalMs":"10-50","scMaxEachPostBytes":{"from":500000,"to":1000000}}`) + "#x",
			name: "x", key: "transport", value: "map[mode:packet-up sc_max_each_post_bytes:500000-1000000 sc_min_posts_interval_ms:10-50 type:xhttp]"},
		{link: "vless://u@h:443?type=xhttp&extra=%7Bnope", err: "xhttp extra is not a JSON object"},
		{link: "vless://u@h:443?security=tls&alpn=h3&fp=chrome&type=xhttp#x", name: "x", key: "tls", value: "map[alpn:[h3]]"},
		{link: "trojan://a:b@h:443#x", name: "x", key: "password", value: "a:b"},
		{link: "trojan://p@h:443?security=none#x", name: "x", key: "tls", value: ""},
		{link: "hy2://p@h:443,5000-6000/#x", err: "port hopping"},
		{link: "hysteria2://p@h:443/?obfs=gost", err: `obfs "gost"`},
		{link: "socks5://h:1/path", err: "has no path"},
		{link: "wireguard://k@h:51820?publickey=p#x", err: "no address"},
		{link: "wireguard://k@h:51820?publickey=p&address=10.0.0.2,fd00::2#x", name: "x", server: "", key: "addresses", value: "[10.0.0.2/32 fd00::2/128]"},
		{link: "ssr://abc", err: "ssr is not a protocol"},
		{link: "ftp://h:1", err: `unknown link scheme "ftp"`},
	}
	for _, tc := range tests {
		n, err := ParseLink(tc.link)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want ...%s...", tc.link, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.link, err)
			continue
		}
		if tc.name != "" && n.Name != tc.name {
			t.Errorf("%s: name %q, want %q", tc.link, n.Name, tc.name)
		}
		if tc.server != "" && n.Outbound["server"] != tc.server {
			t.Errorf("%s: server %v, want %s", tc.link, n.Outbound["server"], tc.server)
		}
		got := ""
		if v, ok := n.Outbound[tc.key]; ok {
			got = strings.TrimSpace(strings.ReplaceAll(fmtValue(v), "\n", " "))
		}
		if got != tc.value {
			t.Errorf("%s: %s = %q, want %q", tc.link, tc.key, got, tc.value)
		}
	}
}

// The base64 wrapper: std or URL alphabet, padded or not, with line breaks.
func TestBase64Wrapper(t *testing.T) {
	list := "socks5://h:1#a\r\nhttp://h:2#b?\n"
	for _, enc := range []string{
		base64.StdEncoding.EncodeToString([]byte(list)),
		base64.RawURLEncoding.EncodeToString([]byte(list)),
		wrap(base64.StdEncoding.EncodeToString([]byte(list)), 8),
	} {
		nodes, skipped, err := Parse([]byte(enc))
		if err != nil || len(nodes) != 2 || len(skipped) != 0 || nodes[0].Name != "a" || nodes[1].Name != "b?" {
			t.Errorf("%q: %+v %+v %v", enc, nodes, skipped, err)
		}
	}
	if _, _, err := Parse([]byte(base64.StdEncoding.EncodeToString([]byte("not links")))); err == nil {
		t.Error("base64 of text that is no link list was read")
	}
}

func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\n")
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

func TestUniqueNames(t *testing.T) {
	nodes, _, err := Parse([]byte("socks5://h:1#a\nsocks5://h:2#a%202\nsocks5://h:3#a\nsocks5://h:4#a\n"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range nodes {
		got = append(got, n.Name)
	}
	if strings.Join(got, "|") != "a|a 2|a 3|a 4" {
		t.Fatalf("names %q", got)
	}
}

func fmtValue(v any) string { return fmt.Sprint(v) }

// Comment lines before the first link do not hide a link list, and a
// Clash proxy without a name is named after its position.
func TestCommentsAndUnnamedClashProxy(t *testing.T) {
	nodes, _, err := Parse([]byte("# my nodes\n\nsocks5://h:1#a\n"))
	if err != nil || len(nodes) != 1 || nodes[0].Name != "a" {
		t.Fatalf("%+v %v", nodes, err)
	}
	_, skipped, err := Parse([]byte("proxies:\n  - {type: tuic, server: h, port: 1}\n  - 7\n"))
	if err != nil || len(skipped) != 2 || skipped[0].Name != "proxies[0] (line 2)" || !strings.HasPrefix(skipped[1].Name, "proxies[1] (line 3)") {
		t.Fatalf("%+v %v", skipped, err)
	}
}

func TestClashBandwidth(t *testing.T) {
	for in, want := range map[string]int64{"100": 100, "30 Mbps": 30, "1 Gbps": 1000, "500 kbps": 0, "1.5 gbps": 1500} {
		if got, err := mbps(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "10 parsecs", "-1"} {
		if _, err := mbps(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
