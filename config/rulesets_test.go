package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"switchyard/internal/geoiptest"
	"switchyard/spec"
)

func TestRuleSets(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ads.txt"), []byte("+.ads.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("payload:\n  - DOMAIN,a.com\n  - GEOSITE,cn\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "c.toml")
	ok := `[[rule_sets]]
tag = "ads"
path = "ads.txt"
format = "clash-domain"

[[rules]]
rule_set = ["ads"]
outbound = "block"

[dns]
servers = ["udp://1.1.1.1:53"]

[[dns.rules]]
rule_set = ["ads"]
action = "block"
`
	s, _, err := parse([]byte(ok), path, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := spec.RuleSet{Tag: "ads", Path: filepath.Join(dir, "ads.txt"), Format: "clash-domain",
		Sum: "47760c775de16002f2f943a28d20d4cce124a2d779af807dd6e1df3bf03fead4"}
	if len(s.RuleSets) != 1 || s.RuleSets[0] != want {
		t.Fatalf("rule sets %+v", s.RuleSets)
	}
	if len(s.Rules) != 1 || len(s.Rules[0].RuleSet) != 1 || s.Rules[0].RuleSet[0] != want {
		t.Fatalf("rules %+v", s.Rules)
	}
	if len(s.DNS.Rules) != 1 || len(s.DNS.Rules[0].RuleSet) != 1 || s.DNS.Rules[0].RuleSet[0] != want {
		t.Fatalf("dns rules %+v", s.DNS.Rules)
	}

	for _, c := range []struct{ name, text, want string }{
		{"url is http or https", "[[rule_sets]]\ntag = \"x\"\nurl = \"ftp://example.com/x.srs\"\nformat = \"srs\"\n",
			"c.toml:3: rule_sets[0].url: \"ftp://example.com/x.srs\" is not an http or https URL"},
		{"interval needs url", "[[rule_sets]]\ntag = \"x\"\npath = \"ads.txt\"\nformat = \"clash-domain\"\ninterval = \"1h\"\n",
			"c.toml:5: rule_sets[0].interval: interval applies to url"},
		{"a broken file names its line", "[[rule_sets]]\ntag = \"x\"\npath = \"bad.yaml\"\nformat = \"clash-classical\"\n",
			"rule_sets[0].path: rule set \"x\" (clash-classical) does not load: " + filepath.Join(dir, "bad.yaml") + ":3: rule type \"GEOSITE\""},
		{"a missing file", "[[rule_sets]]\ntag = \"x\"\npath = \"nope.srs\"\nformat = \"srs\"\n", "nope.srs: no such file or directory"},
		{"an unknown format", "[[rule_sets]]\ntag = \"x\"\npath = \"ads.txt\"\nformat = \"geosite\"\n", "c.toml:4: rule_sets[0].format: \"geosite\" is not one of"},
		{"an unknown tag", "[[rules]]\nrule_set = [\"nope\"]\noutbound = \"direct\"\n", "c.toml:2: rules[0].rule_set[0]: unknown rule set \"nope\""},
		{"a duplicate tag", strings.Repeat("[[rule_sets]]\ntag = \"x\"\npath = \"ads.txt\"\nformat = \"clash-domain\"\n", 2), "duplicate rule set tag \"x\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := parse([]byte(c.text), path, dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
}

func TestGeoIPRules(t *testing.T) {
	dir := t.TempDir()
	db := geoiptest.Write(t, dir, map[string]string{"1.0.0.0/8": "CN"})
	path := filepath.Join(dir, "c.toml")
	s, _, err := parse([]byte("[route]\ngeoip_path = \"country.mmdb\"\n\n[[rules]]\ngeoip = [\"cn\"]\noutbound = \"direct\"\n"), path, dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Route.GeoIPPath != db || len(s.Rules) != 1 || s.Rules[0].GeoIPPath != db || len(s.Rules[0].GeoIP) != 1 || s.Rules[0].GeoIP[0] != "CN" {
		t.Fatalf("route %+v rules %+v", s.Route, s.Rules)
	}
	if err := os.WriteFile(filepath.Join(dir, "junk.mmdb"), []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, text, want string }{
		{"no database", "[[rules]]\ngeoip = [\"cn\"]\noutbound = \"direct\"\n", "c.toml:2: rules[0].geoip: geoip needs a database: set [route].geoip_path"},
		{"not a database", "[route]\ngeoip_path = \"junk.mmdb\"\n", "c.toml:2: route.geoip_path: the GeoIP database does not load"},
		{"a bad code", "[route]\ngeoip_path = \"country.mmdb\"\n[[rules]]\ngeoip = [\"china\"]\noutbound = \"direct\"\n", "c.toml:4: rules[0].geoip[0]: \"china\" is not a two-letter country code"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := parse([]byte(c.text), path, dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one with %q", err, c.want)
			}
		})
	}
}
