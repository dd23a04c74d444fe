package config

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"switchyard/spec"
)

func TestHealthKeys(t *testing.T) {
	s := mustParse(t, `[health]
tcp_check_url = ["http://probe.example/204", "https://[2001:db8::1]:8443/x?y#z"]
tcp_check_method = "GET"
udp_check_dns = ["9.9.9.9:53", "[2001:DB8::53]:53", "[::ffff:192.0.2.1]:5353", "dns.example:53"]
check_interval = "10s"
check_timeout = "10s"
idle_timeout = "2h"
`)
	want := spec.Health{
		TCPCheckURLs:   []string{"http://probe.example/204", "https://[2001:db8::1]:8443/x?y#z"},
		TCPCheckMethod: "GET",
		UDPCheckDNS:    []string{"9.9.9.9:53", "[2001:db8::53]:53", "192.0.2.1:5353", "dns.example:53"},
		CheckInterval:  10 * time.Second,
		CheckTimeout:   10 * time.Second,
		IdleTimeout:    2 * time.Hour,
	}
	if !spec.Equal(s.Health, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Health, want)
	}
}

// An empty list is not a list left out: [] turns the URL probe into a raw
// TCP connect, and UDP probing off.
func TestHealthEmptyLists(t *testing.T) {
	s := mustParse(t, "[health]\ntcp_check_url = []\nudp_check_dns = []\n")
	want := defaultHealth()
	want.TCPCheckURLs, want.UDPCheckDNS = nil, nil
	if !spec.Equal(s.Health, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Health, want)
	}
	s = mustParse(t, "[health]\ntcp_check_method = \"HEAD\"\n")
	if !spec.Equal(s.Health, defaultHealth()) {
		t.Fatalf("got  %+v\nwant the defaults", s.Health)
	}
}

func TestHealthErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"bad values", `[health]
tcp_check_url = ["https://ok.example/", "", "gstatic.com/generate_204", "udp://x:53"]
tcp_check_method = "head"
udp_check_dns = ["1.1.1.1", "1.1.1.1:0", "dns.example:53", "bad host:53", "[fe80::1%eth0]:53"]
check_interval = "0s"
check_timeout = "-5s"
idle_timeout = "1 hour"
`, []want{
			{2, "health.tcp_check_url[1]", `"" is not an http or https URL`},
			{2, "health.tcp_check_url[2]", `"gstatic.com/generate_204" is not an http or https URL`},
			{2, "health.tcp_check_url[3]", `"udp://x:53" is not an http or https URL`},
			{3, "health.tcp_check_method", `"head" is not one of HEAD | GET`},
			{4, "health.udp_check_dns[0]", `bad address "1.1.1.1"`},
			{4, "health.udp_check_dns[1]", `"1.1.1.1:0": port 0 is not a server port`},
			{4, "health.udp_check_dns[3]", `"bad host" is neither an IP nor a host name`},
			{4, "health.udp_check_dns[4]", "zoned addresses are not supported"},
			{5, "health.check_interval", `"0s" must be above zero`},
			{6, "health.check_timeout", `"-5s" must be above zero`},
			{7, "health.idle_timeout", `"1 hour" is not a duration`},
		}},

		{"a timeout longer than the interval", `[health]
check_interval = "10s"
check_timeout = "11s"
`, []want{{3, "health.check_timeout",
			`"11s" is longer than check_interval (10s): a probe must end before the next one is due`}}},

		{"the default timeout longer than the interval", `[health]
check_interval = "2s"
`, []want{{2, "health.check_interval",
			`"2s" is shorter than check_timeout (5s, the default): a probe must end before the next one is due`}}},

		{"the default interval shorter than the timeout", `[health]
check_timeout = "1m"
`, []want{{2, "health.check_timeout", `"1m" is longer than check_interval (30s)`}}},

		{"wrong types and unknown keys", `[health]
tcp_check_url = "https://probe.example/"
`, []want{{2, "health.tcp_check_url", "expected a list of strings, found a string"}}},

		{"unknown keys", `[health]
interval = "30s"
[state]
file = "x.db"
`, []want{
			{2, "health.interval", `unknown key "interval"`},
			{4, "state.file", `unknown key "file"`},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.text, tc.want) })
	}
}

func TestStatePath(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "elsewhere", "state.db")
	for _, tc := range []struct {
		name, text string
		want       string
	}{
		{"left out: beside the file", "", filepath.Join(dir, "switchyard.db")},
		{"empty: memory only", "[state]\npath = \"\"\n", ""},
		{"relative: to the file's folder", "[state]\npath = \"state/../sy.db\"\n", filepath.Join(dir, "sy.db")},
		{"absolute", "[state]\npath = \"" + abs + "\"\n", abs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "sy.toml")
			if err := os.WriteFile(path, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			s, _, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if s.State.Path != tc.want {
				t.Fatalf("state path %q, want %q", s.State.Path, tc.want)
			}
		})
	}

	// A relative file name puts the state beside it all the same, as an
	// absolute path.
	t.Chdir(dir)
	if err := os.WriteFile("rel.toml", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, _, err := Load("rel.toml")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "switchyard.db"); s.State.Path != want {
		t.Fatalf("state path %q, want %q", s.State.Path, want)
	}

	// Text from no file keeps its state in memory, unless it names a file
	// (relative to the working directory).
	if s := mustParse(t, ""); s.State.Path != "" {
		t.Fatalf("Parse: state path %q, want memory only", s.State.Path)
	}
	if s := mustParse(t, "[state]\npath = \"p.db\"\n"); s.State.Path != filepath.Join(dir, "p.db") {
		t.Fatalf("Parse: state path %q", s.State.Path)
	}
}
