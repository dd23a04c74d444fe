package provider

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
)

// BenchmarkParse1000 parses a subscription of 1,000 nodes in each format.
func BenchmarkParse1000(b *testing.B) {
	var links, clash strings.Builder
	clash.WriteString("proxies:\n")
	for i := range 1000 {
		fmt.Fprintf(&links, "vless://b831381d-6324-4d53-ad4f-8cda48b30811@n%d.example.com:443?security=tls&type=ws&path=%%2Fws&host=cdn.example.com#node%%20%d\n", i, i)
		fmt.Fprintf(&clash, "  - {name: \"node %d\", type: vmess, server: n%d.example.com, port: 443, uuid: b831381d-6324-4d53-ad4f-8cda48b30811, alterId: 0, cipher: auto, tls: true, network: ws, ws-opts: {path: /ws}}\n", i, i)
	}
	inputs := map[string][]byte{
		"links":  []byte(links.String()),
		"base64": []byte(base64.StdEncoding.EncodeToString([]byte(links.String()))),
		"clash":  []byte(clash.String()),
	}
	for _, name := range []string{"links", "base64", "clash"} {
		in := inputs[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				nodes, _, err := Parse(in)
				if err != nil || len(nodes) != 1000 {
					b.Fatalf("%d nodes, %v", len(nodes), err)
				}
			}
		})
	}
}
