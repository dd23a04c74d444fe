package provider

import (
	"os"
	"testing"
)

func seedFiles(f *testing.F) {
	for _, name := range []string{"links.txt", "clash.yaml", "base64-std.txt", "base64-url.txt", "vmess-v2rayn.txt"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParse: any content converts or errors, without a panic, and every
// node has a unique, non-empty name.
func FuzzParse(f *testing.F) {
	seedFiles(f)
	f.Add([]byte("proxies:\n  - &a {name: x, type: ss}\n  - *a\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		nodes, _, err := Parse(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, n := range nodes {
			if n.Name == "" || seen[n.Name] {
				t.Fatalf("name %q empty or repeated", n.Name)
			}
			seen[n.Name] = true
			if n.Outbound["type"] == nil {
				t.Fatalf("node %q has no type", n.Name)
			}
		}
	})
}

// FuzzParseLink: one share link of any scheme.
func FuzzParseLink(f *testing.F) {
	for _, s := range []string{
		"ss://YWVzLTI1Ni1nY206c2VjcmV0@ss.example.com:8388#n",
		"ss://2022-blake3-aes-128-gcm%3AMDEyMzQ1Njc4OWFiY2RlZg%3D%3D@[::1]:8443",
		"vmess://eyJhZGQiOiJhIiwicG9ydCI6MX0",
		"vless://u@h:1?type=ws&path=%2F%3Fed%3D9&security=tls",
		"trojan://p@h:443?type=grpc",
		"hy2://p@[::1]:443/?obfs=salamander",
		"socks5://u:p@h:1",
		"https://h:1?sni=x",
		"wireguard://k@h:1?address=10.0.0.1&reserved=1,2,3",
		`vless://u@h:443?type=xhttp&extra={"xmux":{"maxConcurrency":"2-4"},"downloadSettings":{"address":"d","port":1,"security":"reality","realitySettings":{"publicKey":"k"},"xhttpSettings":{"extra":{"xPaddingBytes":{"from":1,"to":2}}}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseLink(s)
		if err == nil && (n.Name == "" || n.Outbound["type"] == nil) {
			t.Fatalf("%q: node without name or type: %+v", s, n)
		}
	})
}

// FuzzClashProxy: the Clash YAML proxy decoder over any YAML document.
func FuzzClashProxy(f *testing.F) {
	b, err := os.ReadFile("testdata/clash.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte("proxies:\n  - {name: a, type: wireguard, server: h, port: 1, reserved: x}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = parseClash(b)
	})
}
