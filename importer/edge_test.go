package importer

import (
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
)

// The edge cases of testdata/edge.yaml, read back from the TOML: names
// with emoji, CJK, quotes, a backslash and a tab are tags as they were
// (the second of two equal names and the reserved names suffixed), IPv6
// servers are bracketed, a relay and what only reaches through it are
// reported and left out, and unsupported rules are reported on their line.
func TestEdgeCases(t *testing.T) {
	out, problems := convertFile(t, "edge.yaml")
	var doc struct {
		Outbounds []struct{ Tag, Server, Endpoint string } `toml:"outbounds"`
		Groups    []struct {
			Tag     string
			Members []string
		} `toml:"groups"`
		Rules []map[string]any `toml:"rules"`
	}
	if err := toml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	servers := map[string]string{}
	for _, o := range doc.Outbounds {
		servers[o.Tag] = o.Server + o.Endpoint
	}
	jp := "🇯🇵 東京 \"quoted\" \\ back"
	for tag, server := range map[string]string{
		jp:          "[2001:db8::42]:443",
		jp + " 2":   "203.0.113.1:443",
		"GLOBAL 2":  "[2001:db8::5]:8388",
		"block 2":   "10.0.0.1:3128",
		"tab\tname": "[::1]:1080",
		"wg":        "[2001:db8::9]:51820",
	} {
		if servers[tag] != server {
			t.Errorf("outbound %q: server %q, want %q (outbounds: %v)", tag, servers[tag], server, servers)
		}
	}
	for _, g := range doc.Groups {
		if g.Tag == "uses-relay" || g.Tag == "relay-chain" {
			t.Errorf("group %q was converted", g.Tag)
		}
		if g.Tag == "🚀 节点选择" && (len(g.Members) != 9 || g.Members[0] != "direct" || g.Members[1] != "block") {
			t.Errorf("group 🚀 节点选择 members %q: want direct, block and every converted proxy", g.Members)
		}
	}
	// OR,((DOMAIN,a.example),(DOMAIN,b.example)),DIRECT is one rule per
	// condition, merged back into one.
	orRule := false
	for _, r := range doc.Rules {
		if d, ok := r["domain"].([]any); ok && len(d) == 2 && d[0] == "a.example" && d[1] == "b.example" && r["outbound"] == "direct" {
			orRule = true
		}
	}
	if !orRule {
		t.Errorf("the OR rule was not converted:\n%s", out)
	}
	for _, want := range []string{
		`edge.yaml:85: proxy group "relay-chain": not converted: a relay chains its proxies`,
		`edge.yaml:88: proxy group "uses-relay": not converted: none of its members was converted`,
		`edge.yaml:106: SRC-PORT,7777,DIRECT: not converted: switchyard rules have no source port`,
		`edge.yaml:112: NOT,((DOMAIN,c.example)),DIRECT: not converted`,
		`edge.yaml:36: proxy "GLOBAL": renamed "GLOBAL 2": "GLOBAL" is a tag switchyard reserves`,
	} {
		if !strings.Contains(problems, want) {
			t.Errorf("no problem %q in:\n%s", want, problems)
		}
	}
}
