package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A url provider reads its cached copy at path; interval and download_via
// are carried in the spec.
func TestURLProviderReadsItsCache(t *testing.T) {
	s, _, err := writeConfig(t, `[[providers]]
tag = "sub"
url = "https://sub.example/x"
path = "sub-cache.txt"
interval = "1h"
download_via = "auto"
[[groups]]
tag = "auto"
policy = "selector"
members = ["direct"]
use = ["sub"]
`, map[string]string{"sub-cache.txt": "socks5://127.0.0.1:1080#A\nsocks5://127.0.0.1:1081#B\n"})
	if err != nil {
		t.Fatal(err)
	}
	p := s.Providers[0]
	if p.URL != "https://sub.example/x" || p.Interval != time.Hour || p.Via != "auto" || filepath.Base(p.CachePath) != "sub-cache.txt" || p.Path != "" {
		t.Fatalf("provider %+v", p)
	}
	if len(p.Nodes) != 2 || strings.Join(s.Groups[0].Members, ",") != "direct,A,B" {
		t.Fatalf("nodes %q members %q", p.Nodes, s.Groups[0].Members)
	}
}

// Without a cached copy the provider has no nodes, said once; a group
// whose only members come from it loads with none; defaults are 24h and
// direct; the cache file is beside the state file, named by kind, tag and
// the URL's hash.
func TestURLProviderWithoutCache(t *testing.T) {
	s, warns, err := writeConfig(t, `[[providers]]
tag = "sub"
url = "https://sub.example/x"
[[groups]]
tag = "auto"
policy = "urltest"
use = ["sub"]
[[rule_sets]]
tag = "ads"
url = "https://lists.example/ads.txt"
format = "clash-domain"
[[rules]]
rule_set = ["ads"]
outbound = "block"
[route]
final = "auto"
`, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := s.Providers[0]
	if p.Interval != 24*time.Hour || p.Via != "direct" || len(p.Nodes) != 0 {
		t.Fatalf("provider %+v", p)
	}
	dir := filepath.Dir(s.State.Path)
	if want := filepath.Join(dir, "cache", "provider-sub-"); !strings.HasPrefix(p.CachePath, want) || len(p.CachePath) != len(want)+8 {
		t.Fatalf("cache %q, want %s<8 hex>", p.CachePath, want)
	}
	rs := s.RuleSets[0]
	if rs.Path != "" || rs.Sum != "" || !strings.HasPrefix(rs.CachePath, filepath.Join(dir, "cache", "rule_set-ads-")) {
		t.Fatalf("rule set %+v", rs)
	}
	if len(s.Groups) != 1 || len(s.Groups[0].Members) != 0 {
		t.Fatalf("groups %+v", s.Groups)
	}
	var text []string
	for _, w := range warns {
		text = append(text, w.Error())
	}
	all := strings.Join(text, "\n")
	if !strings.Contains(all, `sy.toml:3: providers[0].url: provider "sub" has no nodes until its first download`) ||
		!strings.Contains(all, `sy.toml:10: rule_sets[0].url: rule set "ads" matches nothing until its first download`) || len(warns) != 2 {
		t.Fatalf("warnings:\n%s", all)
	}

	// Once the cache is there, the next load reads it.
	if err := os.MkdirAll(filepath.Dir(p.CachePath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.CachePath, []byte("socks5://127.0.0.1:1080#A\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rs.CachePath, []byte("+.ads.example\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2, _, err := Load(filepath.Join(dir, "sy.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s2.Groups[0].Members, ",") != "A" || s2.RuleSets[0].Path != rs.CachePath || s2.RuleSets[0].Sum == "" {
		t.Fatalf("after the download: members %q rule set %+v", s2.Groups[0].Members, s2.RuleSets[0])
	}
	if s2.Rules[0].RuleSet[0].Path != rs.CachePath {
		t.Fatalf("rule %+v", s2.Rules[0])
	}
}

// A cached copy that does not parse is a warning, not a failed load.
func TestURLProviderBadCache(t *testing.T) {
	s, warns, err := writeConfig(t, "[[providers]]\ntag = \"sub\"\nurl = \"https://sub.example/x\"\npath = \"c.txt\"\n",
		map[string]string{"c.txt": "hello world"})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Providers[0].Nodes) != 0 || len(warns) != 1 || !strings.Contains(warns[0].Msg, "does not parse") {
		t.Fatalf("provider %+v warnings %v", s.Providers[0], warns)
	}
}

// Text from no file keeps its downloads under the user's cache folder.
func TestURLProviderCacheWithoutStateFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	s, _, err := ParseIn([]byte("[[providers]]\ntag = \"s/ub\"\nurl = \"https://sub.example/x\"\n"), "payload", "")
	if err != nil {
		t.Fatal(err)
	}
	base, _ := os.UserCacheDir()
	if want := filepath.Join(base, "switchyard", "cache", "provider-s_ub-"); !strings.HasPrefix(s.Providers[0].CachePath, want) {
		t.Fatalf("cache %q, want under %s", s.Providers[0].CachePath, want)
	}
}

// A provider downloaded through a group made of its own nodes, with none
// yet, is warned of.
func TestDownloadViaItsOwnGroup(t *testing.T) {
	_, warns, err := writeConfig(t, "[[providers]]\ntag = \"sub\"\nurl = \"https://a.example/\"\ndownload_via = \"auto\"\n"+
		"[[groups]]\ntag = \"auto\"\npolicy = \"urltest\"\nuse = [\"sub\"]\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 2 || !strings.Contains(warns[1].Error(), `sy.toml:4: providers[0].download_via: group "auto" has no member but the nodes of provider "sub"`) {
		t.Fatalf("warnings %v", warns)
	}
}

func TestDownloadKeyErrors(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"zero interval is allowed", "[[providers]]\ntag = \"s\"\nurl = \"https://a.example/\"\ninterval = \"0\"\n", ""},
		{"negative interval", "[[providers]]\ntag = \"s\"\nurl = \"https://a.example/\"\ninterval = \"-1h\"\n", `sy.toml:4: providers[0].interval: "-1h" must be above zero; use "0" to download only at start and on demand`},
		{"empty url", "[[providers]]\ntag = \"s\"\nurl = \"\"\n", "sy.toml:3: providers[0].url: must not be empty"},
		{"empty path", "[[providers]]\ntag = \"s\"\nurl = \"https://a.example/\"\npath = \"\"\n", "sy.toml:4: providers[0].path: must not be empty"},
		{"rule set via unknown", "[[rule_sets]]\ntag = \"r\"\nurl = \"https://a.example/\"\nformat = \"srs\"\ndownload_via = \"nope\"\n", `sy.toml:5: rule_sets[0].download_via: unknown outbound "nope"`},
		{"download_via without url", "[[rule_sets]]\ntag = \"r\"\npath = \"x.srs\"\nformat = \"srs\"\ndownload_via = \"direct\"\n", `sy.toml:5: rule_sets[0].download_via: download_via applies to url`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := writeConfig(t, c.text, nil)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
