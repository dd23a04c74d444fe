package importer

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	toml "github.com/pelletier/go-toml/v2"
	"go.uber.org/goleak"

	"switchyard/config"
	"switchyard/internal/geoiptest"
	"switchyard/internal/testcert"
	"switchyard/supervisor"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// convertFile converts testdata/name and returns the TOML and the problems
// as the command prints them.
func convertFile(t *testing.T, name string) ([]byte, string) {
	t.Helper()
	in, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out, problems, err := Convert(in, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var b strings.Builder
	for _, p := range problems {
		b.WriteString(p.Format(name) + "\n")
	}
	return out, b.String()
}

// golden compares got with testdata/file, or rewrites it with -update.
func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the conversion:\n--- got\n%s\n--- want\n%s", file, got, want)
	}
}

// goldens are the inputs with a golden TOML (NAME.toml) and problem list
// (NAME.problems).
var goldens = []string{"mihomo.yaml", "singbox.json", "edge.yaml", "singbox-legacy.json"}

func TestGoldenConversions(t *testing.T) {
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) {
			out, problems := convertFile(t, name)
			base := strings.TrimSuffix(name, filepath.Ext(name))
			golden(t, base+".toml", out)
			golden(t, base+".problems", []byte(problems))
		})
	}
}

// TestEveryGoldenOutputLoads writes each conversion beside the files it
// names (provider and rule-set files, the GeoIP database) and checks it as
// switchyard check does: the loader, then the supervisor's build.
func TestEveryGoldenOutputLoads(t *testing.T) {
	for _, name := range goldens {
		t.Run(name, func(t *testing.T) {
			out, _ := convertFile(t, name)
			checkLoads(t, out)
		})
	}
}

// checkLoads writes out into a folder with every file it references and
// loads it.
func checkLoads(t *testing.T, out []byte) {
	t.Helper()
	dir := t.TempDir()
	var doc struct {
		Providers []struct{ Path, URL string } `toml:"providers"`
		RuleSets  []struct {
			Path, URL, Format string
		} `toml:"rule_sets"`
		Outbounds []struct {
			TLS struct {
				CAFile string `toml:"ca_file"`
			} `toml:"tls"`
		} `toml:"outbounds"`
		Route struct {
			GeoIPPath string `toml:"geoip_path"`
		} `toml:"route"`
	}
	if err := toml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("the output is not TOML: %v\n%s", err, out)
	}
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range doc.Providers {
		if p.Path != "" && p.URL == "" {
			write(p.Path, "proxies:\n  - {name: HK one, type: trojan, server: hk.example.com, port: 443, password: x}\n")
		}
	}
	sets := map[string]string{
		"clash-domain":    "+.example.com\n",
		"clash-ipcidr":    "10.0.0.0/8\n",
		"clash-classical": "DOMAIN-SUFFIX,example.com\n",
		"source":          `{"version": 1, "rules": [{"domain_suffix": ["example.com"]}]}`,
	}
	for _, rs := range doc.RuleSets {
		if rs.Path != "" && rs.URL == "" {
			content, ok := sets[rs.Format]
			if !ok {
				t.Fatalf("no test content for a local %s rule set", rs.Format)
			}
			write(rs.Path, content)
		}
	}
	for _, o := range doc.Outbounds {
		if o.TLS.CAFile != "" {
			b, err := os.ReadFile(testcert.New(t, "ca.example").CertFile)
			if err != nil {
				t.Fatal(err)
			}
			write(o.TLS.CAFile, string(b))
		}
	}
	if doc.Route.GeoIPPath != "" {
		db := geoiptest.Write(t, t.TempDir(), map[string]string{"1.0.1.0/24": "CN"})
		b, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		write(doc.Route.GeoIPPath, string(b))
	}
	path := filepath.Join(dir, "switchyard.toml")
	write("switchyard.toml", string(out))
	s, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("the output does not load:\n%v\n%s", err, out)
	}
	if err := supervisor.Check(s); err != nil {
		t.Fatalf("the output does not build: %v\n%s", err, out)
	}
}
