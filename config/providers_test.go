package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/spec"
)

// writeConfig writes the config text and the provider files beside it,
// and loads it.
func writeConfig(t *testing.T, text string, files map[string]string) (*spec.Spec, Warnings, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "sy.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(path)
}

func clashFile(t *testing.T) string {
	b, err := os.ReadFile("../provider/testdata/clash.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func outboundByTag(s *spec.Spec, tag string) (spec.Outbound, bool) {
	for _, o := range s.Outbounds {
		if o.Tag == tag {
			return o, true
		}
	}
	return spec.Outbound{}, false
}

// A Clash provider's nodes become outbounds, a group's use appends them
// after its members, and each skipped node is one warning naming it.
func TestProviderClashNodesAndUse(t *testing.T) {
	s, warns, err := writeConfig(t, `[[providers]]
tag = "sub"
path = "sub.yaml"
[[groups]]
tag = "auto"
policy = "urltest"
members = ["direct"]
use = ["sub"]
`, map[string]string{"sub.yaml": clashFile(t)})
	if err != nil {
		t.Fatal(err)
	}
	nodes := []string{"HK 01", "HK 01 2", "JP vmess ws", "US grpc", "vision", "reality", "trojan hu", "xhttp node", "xhttp split", "xhttp paced", "hy2", "sock", "web", "wg"}
	if len(s.Providers) != 1 || s.Providers[0].Tag != "sub" || !slices.Equal(s.Providers[0].Nodes, nodes) {
		t.Fatalf("providers %+v", s.Providers)
	}
	if want := append([]string{"direct"}, nodes...); !slices.Equal(s.Groups[0].Members, want) {
		t.Fatalf("members %q, want %q", s.Groups[0].Members, want)
	}
	hk, _ := outboundByTag(s, "HK 01")
	if hk.Type != "shadowsocks" || hk.Server != "hk.example.com:8388" || hk.Method != "aes-256-gcm" || hk.Password != "p@ss" || !hk.UDP {
		t.Errorf("HK 01: %+v", hk)
	}
	if hk2, _ := outboundByTag(s, "HK 01 2"); hk2.UDP {
		t.Errorf("HK 01 2: udp: false not kept")
	}
	vm, _ := outboundByTag(s, "JP vmess ws")
	if vm.Transport.Type != "ws" || vm.Transport.Path != "/ray" || vm.Transport.Host != "cdn.example.com" ||
		vm.Transport.Headers["User-Agent"] != "Mozilla" || vm.Transport.MaxEarlyData != 2048 ||
		vm.TLS == nil || !vm.TLS.Insecure || vm.TLS.ServerName != "cdn.example.com" || vm.TLS.Fingerprint != "chrome" {
		t.Errorf("JP vmess ws: %+v tls %+v", vm, vm.TLS)
	}
	xh, _ := outboundByTag(s, "xhttp node")
	if xh.Transport.Type != "xhttp" || !xh.Transport.NoGRPCHeader || xh.Transport.XPaddingMin != 200 || xh.Transport.XPaddingMax != 800 ||
		!spec.Equal(xh.Transport.XMux, &spec.XMux{MaxConcurrency: [2]int64{8, 16}, HMaxReusableSecs: [2]int64{1800, 3000}}) {
		t.Errorf("xhttp node: %+v xmux %+v", xh.Transport, xh.Transport.XMux)
	}
	split, _ := outboundByTag(s, "xhttp split")
	if dl := split.Transport.Download; dl == nil || dl.Server != "d.example.com:8443" || dl.TLS == nil || dl.TLS.ServerName != "d.example.com" ||
		dl.Path != "/dl" || dl.Host != "d.example.com" || !spec.Equal(dl.XMux, &spec.XMux{MaxConcurrency: [2]int64{4, 4}}) {
		t.Errorf("xhttp split: download %+v", dl)
	}
	if paced, _ := outboundByTag(s, "xhttp paced"); paced.Transport.MaxEachPostBytes != 500000 || paced.Transport.MinPostsInterval != 10*time.Millisecond || paced.Transport.MinPostsIntervalMax != 50*time.Millisecond {
		t.Errorf("xhttp paced: %+v", paced.Transport)
	}
	if hy, _ := outboundByTag(s, "hy2"); hy.UpMbps != 30 || hy.DownMbps != 200 || hy.Obfs == nil || hy.Obfs.Password != "opass" {
		t.Errorf("hy2: %+v", hy)
	}
	if wg, _ := outboundByTag(s, "wg"); wg.Endpoint != "203.0.113.1:51820" || len(wg.Addresses) != 2 || wg.MTU != 1280 {
		t.Errorf("wg: %+v", wg)
	}
	var skipped []string
	for _, w := range warns {
		if w.Line != 3 || w.Key != "providers[0].path" {
			t.Errorf("warning placed at %d %s: %v", w.Line, w.Key, w)
		}
		skipped = append(skipped, w.Msg)
	}
	for _, name := range []string{"SS obfs", "vmess legacy", "h2 node", "xhttp split ech", "hy2 hop", "tuic"} {
		if !slices.ContainsFunc(skipped, func(m string) bool { return strings.Contains(m, `node "`+name+`" skipped: `) }) {
			t.Errorf("no warning for %q in %q", name, skipped)
		}
	}
}

// filter and exclude_filter select nodes by name; a node the loader
// refuses as an outbound is skipped with the loader's reason; a node named
// like a configured tag is renamed with a suffix.
func TestProviderFilterRefusalAndCollision(t *testing.T) {
	links := strings.Join([]string{
		"socks5://127.0.0.1:1080#HK%201",
		"socks5://127.0.0.1:1081#HK%202%20slow",
		"socks5://127.0.0.1:1082#JP%201",
		"socks5://127.0.0.1:1083#out",
		"socks5://127.0.0.1:1084#GLOBAL",
		"ss://cmM0LW1kNTpwdw@127.0.0.1:8388#HK%20rc4",
		"vless://b831381d-6324-4d53-ad4f-8cda48b30811@h.example.com:443?security=tls&fp=qq#HK%20fp",
	}, "\n")
	s, warns, err := writeConfig(t, `[[outbounds]]
tag = "out"
type = "socks"
server = "127.0.0.1:9"
[[providers]]
tag = "sub"
path = "links.txt"
filter = "HK|out|GLOBAL"
exclude_filter = "slow"
[[groups]]
tag = "g"
policy = "selector"
use = ["sub"]
default = "HK 1"
`, map[string]string{"links.txt": links})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"HK 1", "out 2", "GLOBAL 2"}; !slices.Equal(s.Groups[0].Members, want) {
		t.Fatalf("members %q, want %q", s.Groups[0].Members, want)
	}
	if o, _ := outboundByTag(s, "out 2"); o.Server != "127.0.0.1:1083" {
		t.Fatalf("out 2: %+v", o)
	}
	if len(warns) != 2 || !strings.Contains(warns[0].Msg, `node "HK rc4" skipped: method:`) ||
		!strings.Contains(warns[1].Msg, `node "HK fp" skipped: tls.fingerprint:`) {
		t.Fatalf("warnings %v", warns)
	}
}

func TestProviderErrors(t *testing.T) {
	tests := []struct {
		name, text string
		files      map[string]string
		line       int
		key, msg   string
	}{
		{"url not http", "[[providers]]\ntag = \"sub\"\nurl = \"file:///etc/passwd\"\n", nil,
			3, "providers[0].url", "is not an http or https URL"},
		{"bad interval", "[[providers]]\ntag = \"sub\"\nurl = \"https://sub.example/x\"\ninterval = \"daily\"\n", nil,
			4, "providers[0].interval", "is not a duration"},
		{"unknown download_via", "[[providers]]\ntag = \"sub\"\nurl = \"https://sub.example/x\"\ndownload_via = \"nowhere\"\n", nil,
			4, "providers[0].download_via", `unknown outbound "nowhere"`},
		{"interval", "[[providers]]\ntag = \"sub\"\npath = \"s.txt\"\ninterval = \"1h\"\n", map[string]string{"s.txt": "socks5://h:1"},
			4, "providers[0].interval", "interval applies to url"},
		{"bad filter", "[[providers]]\ntag = \"sub\"\npath = \"s.txt\"\nfilter = \"(\"\n", map[string]string{"s.txt": "socks5://h:1"},
			4, "providers[0].filter", "bad regular expression"},
		{"bad exclude_filter", "[[providers]]\ntag = \"sub\"\npath = \"s.txt\"\nexclude_filter = \"[\"\n", map[string]string{"s.txt": "socks5://h:1"},
			4, "providers[0].exclude_filter", "bad regular expression"},
		{"missing file", "[[providers]]\ntag = \"sub\"\npath = \"none.yaml\"\n", nil,
			3, "providers[0].path", "none.yaml: no such file or directory"},
		{"a folder", "[[providers]]\ntag = \"sub\"\npath = \".\"\n", nil,
			3, "providers[0].path", "not a regular file"},
		{"unreadable content", "[[providers]]\ntag = \"sub\"\npath = \"s.txt\"\n", map[string]string{"s.txt": "hello world"},
			3, "providers[0].path", "s.txt: the content is neither"},
		{"bad yaml", "[[providers]]\ntag = \"sub\"\npath = \"s.yaml\"\n", map[string]string{"s.yaml": "proxies:\n  - {name: [\n"},
			3, "providers[0].path", "bad Clash YAML"},
		{"duplicate tag", "[[providers]]\ntag = \"sub\"\npath = \"s.txt\"\n[[providers]]\ntag = \"sub\"\npath = \"s.txt\"\n", map[string]string{"s.txt": "socks5://h:1"},
			5, "providers[1].tag", `duplicate provider tag "sub" (first declared on line 2)`},
		{"empty provider in use", "[[providers]]\ntag = \"sub\"\npath = \"s.txt\"\nfilter = \"nothing\"\n[[groups]]\ntag = \"g\"\npolicy = \"fallback\"\nuse = [\"sub\"]\n", map[string]string{"s.txt": "socks5://h:1"},
			8, "groups[0].use", "the group has no member"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, err := writeConfig(t, tc.text, tc.files)
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error %v (spec %+v), want Errors", err, s)
			}
			if len(errs) != 1 {
				t.Fatalf("got %d problems: %v", len(errs), err)
			}
			if e := errs[0]; e.Line != tc.line || e.Key != tc.key || !strings.Contains(e.Msg, tc.msg) {
				t.Fatalf("got %v\nwant line %d %s: ...%s...", e, tc.line, tc.key, tc.msg)
			}
		})
	}
}
