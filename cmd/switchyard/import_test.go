package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const importClash = `mixed-port: 7890
proxies:
  - {name: "🇭🇰 HK", type: trojan, server: hk.example.com, port: 443, password: pw}
  - {name: tuic, type: tuic, server: t.example.com, port: 443}
proxy-groups:
  - {name: Proxy, type: select, proxies: ["🇭🇰 HK", tuic, DIRECT]}
rules:
  - DOMAIN-SUFFIX,example.com,Proxy
  - PROCESS-NAME,curl,DIRECT
  - MATCH,DIRECT
`

// switchyard import writes the TOML to -o, lists what it could not convert
// as FILE:LINE: ITEM: WHY on stderr and exits 0; the output passes
// switchyard check.
func TestImportWritesTOMLThatPassesCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "clash.yaml")
	out := filepath.Join(dir, "switchyard.toml")
	if err := os.WriteFile(in, []byte(importClash), 0o600); err != nil {
		t.Fatal(err)
	}
	stderr, code := switchyard(t, "import", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	for _, want := range []string{
		in + `:4: proxy "tuic": not converted: type "tuic" is not a protocol switchyard has a client for`,
		in + `:6: proxy group "Proxy": member left out: "tuic" was not converted (see above)`,
		in + `:9: PROCESS-NAME,curl,DIRECT: not converted: switchyard does not see the local process of a flow`,
	} {
		if !strings.Contains(stderr, want+"\n") {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	toml, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`tag = "🇭🇰 HK"`, `members = ["🇭🇰 HK", "direct"]`, `final = "direct"`, `domain_suffix = ["example.com"]`} {
		if !strings.Contains(string(toml), want) {
			t.Errorf("the output lacks %q:\n%s", want, toml)
		}
	}
	if fi, err := os.Stat(out); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the output's mode is %v (%v), want 0600: it holds passwords", fi.Mode().Perm(), err)
	}
	if stderr, code := switchyard(t, "check", "-c", out); code != 0 {
		t.Fatalf("switchyard check of the output: exit %d:\n%s", code, stderr)
	}
}

// Without -o the TOML goes to stdout.
func TestImportPrintsTOMLOnStdout(t *testing.T) {
	in := filepath.Join(t.TempDir(), "sing-box.json")
	if err := os.WriteFile(in, []byte(`{"outbounds": [{"type": "socks", "tag": "up", "server": "127.0.0.1", "server_port": 1080}], "route": {"final": "up"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), runMainEnv+"=1", runMainEnv+"_ARGS=import\n"+in)
	stdout, err := cmd.Output()
	if err != nil {
		t.Fatalf("switchyard import: %v", err)
	}
	for _, want := range []string{"[[outbounds]]\ntag = \"up\"\ntype = \"socks\"\nserver = \"127.0.0.1:1080\"\n", "[route]\nfinal = \"up\"\n"} {
		if !strings.Contains(string(stdout), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
}

// A file that is neither format exits 1 with one line saying so, and
// writes no output file.
func TestImportRefusesAFileOfNeitherFormat(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.toml")
	for name, content := range map[string]string{
		"list.txt":  "just some text\n",
		"other.yml": "name: a kubernetes thing\nspec: {}\n",
		"bad.json":  `{"outbounds": [`,
		"arr.json":  `[1, 2]`,
	} {
		in := filepath.Join(dir, name)
		if err := os.WriteFile(in, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		stderr, code := switchyard(t, "import", in, "-o", out)
		if code != 1 || !strings.Contains(stderr, in+": the file is neither a Clash/mihomo YAML configuration nor a sing-box JSON configuration") {
			t.Errorf("%s: exit %d, stderr:\n%s", name, code, stderr)
		}
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: an output file was written", name)
		}
	}
	if stderr, code := switchyard(t, "import", filepath.Join(dir, "missing.yaml")); code != 1 || !strings.Contains(stderr, "no such file") {
		t.Errorf("a missing file: exit %d, stderr:\n%s", code, stderr)
	}
}
