package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"
)

// execute runs the subcommand cmd with args in process, under a root made
// as main makes it, and returns its output and exit status.
func execute(t *testing.T, cmd *cobra.Command, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	root := &cobra.Command{Use: "switchyard", SilenceUsage: true, SilenceErrors: true}
	root.AddCommand(cmd)
	root.SetArgs(append([]string{cmd.Name()}, args...))
	root.SetOut(&out)
	root.SetErr(&errb)
	err := root.Execute()
	var ee exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case err != nil:
		t.Fatalf("%v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// probeConfig writes a configuration with a working node "good" (direct),
// a dead one "bad" (a SOCKS server on a closed port), a local
// generate_204 as tcp_check_url, no UDP probing, and extra appended.
func probeConfig(t *testing.T, extra string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	cfg := filepath.Join(t.TempDir(), "config.toml")
	text := fmt.Sprintf(`[health]
tcp_check_url = ["%s/generate_204"]
udp_check_dns = []
check_timeout = "3s"

[[outbounds]]
tag = "good"
type = "direct"

[[outbounds]]
tag = "bad"
type = "socks"
server = %q
%s`, srv.URL, closed, extra)
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

const autoGroup = `
[[groups]]
tag = "auto"
policy = "urltest"
members = ["bad", "good"]

[route]
final = "auto"
`

// rows are the table's rows by node, each cell by column name.
func rows(t *testing.T, stdout string) map[string]map[string]string {
	t.Helper()
	lines := strings.Split(stdout, "\n")
	head := strings.Fields(lines[0])
	if !slices.Equal(head, []string{"NODE", "TCP4", "TCP6", "DNS4", "DNS6", "DATA4", "DATA6", "RTT", "ERROR"}) {
		t.Fatalf("header %q", lines[0])
	}
	out := map[string]map[string]string{}
	for _, l := range lines[1:] {
		if l == "" {
			break
		}
		f := strings.Fields(l)
		row := map[string]string{}
		for i, h := range head[:len(head)-1] {
			row[h] = f[i]
		}
		row["ERROR"] = strings.Join(f[len(head)-1:], " ")
		out[f[0]] = row
	}
	return out
}

func TestProbeCommandPrintsNodesAndGroupPicks(t *testing.T) {
	stdout, stderr, code := execute(t, probeCmd(), "-c", probeConfig(t, autoGroup))
	if code != 2 {
		t.Fatalf("exit status %d, want 2 (bad did not answer); stderr:\n%s", code, stderr)
	}
	r := rows(t, stdout)
	if len(r) != 2 {
		t.Fatalf("rows %v:\n%s", r, stdout)
	}
	good, bad := r["good"], r["bad"]
	if good["TCP4"] != "alive" || good["TCP6"] != "-" || good["DNS4"] != "-" || good["RTT"] == "-" || good["ERROR"] != "" {
		t.Fatalf("good: %v\n%s", good, stdout)
	}
	if bad["TCP4"] != "dead" || bad["RTT"] != "-" || !strings.Contains(bad["ERROR"], "connection refused") {
		t.Fatalf("bad: %v\n%s", bad, stdout)
	}
	for _, want := range []string{
		"group auto (urltest): tcp → good via auto > good — lowest average ",
		"group auto (urltest): udp → good via auto > good — ",
	} {
		if !strings.Contains(stdout, "\n"+want) {
			t.Fatalf("no line %q in:\n%s", want, stdout)
		}
	}
}

func TestProbeCommandJSON(t *testing.T) {
	stdout, _, code := execute(t, probeCmd(), "-c", probeConfig(t, autoGroup), "--json")
	if code != 2 {
		t.Fatalf("exit status %d, want 2", code)
	}
	var rep struct {
		Nodes []struct {
			Name      string   `json:"name"`
			Answered  bool     `json:"answered"`
			LatencyMS *float64 `json:"latency_ms"`
			TCPError  string   `json:"tcp_error"`
			States    map[string]map[string]struct {
				Observed bool `json:"observed"`
				Alive    bool `json:"alive"`
				History  []struct {
					OK      bool    `json:"ok"`
					DelayMS float64 `json:"delay_ms"`
				} `json:"history"`
			} `json:"states"`
		} `json:"nodes"`
		Groups []struct {
			Tag    string `json:"tag"`
			Policy string `json:"policy"`
			TCP    struct {
				Leaf       string   `json:"leaf"`
				Chain      []string `json:"chain"`
				Reason     string   `json:"reason"`
				Sentence   string   `json:"sentence"`
				Candidates []struct {
					Member   string `json:"member"`
					Eligible bool   `json:"eligible"`
					Excluded string `json:"excluded"`
				} `json:"candidates"`
			} `json:"tcp"`
			UDP struct {
				Leaf string `json:"leaf"`
			} `json:"udp"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, stdout)
	}
	if len(rep.Nodes) != 2 || rep.Nodes[0].Name != "good" || rep.Nodes[1].Name != "bad" {
		t.Fatalf("nodes: %+v", rep.Nodes)
	}
	good, bad := rep.Nodes[0], rep.Nodes[1]
	g4 := good.States["tcp"]["ipv4"]
	if !good.Answered || good.LatencyMS == nil || !g4.Observed || !g4.Alive || len(g4.History) != 1 || !g4.History[0].OK || g4.History[0].DelayMS <= 0 {
		t.Fatalf("good: %+v", good)
	}
	if s := good.States["tcp"]["ipv6"]; s.Observed || !s.Alive {
		t.Fatalf("good tcp ipv6: %+v", s)
	}
	if len(good.States) != 3 || len(good.States["data_udp"]) != 2 {
		t.Fatalf("states: %+v", good.States)
	}
	b4 := bad.States["tcp"]["ipv4"]
	if bad.Answered || bad.LatencyMS != nil || bad.TCPError == "" || !b4.Observed || b4.Alive || len(b4.History) != 1 || b4.History[0].OK {
		t.Fatalf("bad: %+v", bad)
	}
	if len(rep.Groups) != 1 {
		t.Fatalf("groups: %+v", rep.Groups)
	}
	g := rep.Groups[0]
	if g.Tag != "auto" || g.Policy != "urltest" || g.TCP.Leaf != "good" || !slices.Equal(g.TCP.Chain, []string{"auto", "good"}) ||
		g.TCP.Reason != "lowest_average" || g.TCP.Sentence == "" || g.UDP.Leaf != "good" {
		t.Fatalf("group: %+v", g)
	}
	if c := g.TCP.Candidates; len(c) != 2 || c[0].Member != "bad" || c[0].Eligible || c[0].Excluded != "dead" || !c[1].Eligible {
		t.Fatalf("candidates: %+v", c)
	}
}

// Every key the JSON output has is named in the help text.
func TestProbeCommandDocumentsItsJSONFields(t *testing.T) {
	stdout, _, _ := execute(t, probeCmd(), "-c", probeConfig(t, autoGroup), "--json")
	var v any
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	for k := range keys {
		if !strings.Contains(probeHelp, k) {
			t.Errorf("the help does not document %q", k)
		}
	}
	if !strings.Contains(probeHelp, "Exit status") {
		t.Error("the help does not document the exit status")
	}
}

// A named group probes the leaves it reaches and only them.
func TestProbeCommandOfANamedGroupProbesItsLeavesOnly(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepts atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			c.Close()
		}
	}()
	defer func() {
		ln.Close()
		<-done
	}()
	cfg := probeConfig(t, fmt.Sprintf(`
[[outbounds]]
tag = "other"
type = "socks"
server = %q

[[groups]]
tag = "mine"
policy = "fallback"
members = ["good"]

[[groups]]
tag = "theirs"
policy = "fallback"
members = ["bad", "other"]
`, ln.Addr().String()))
	stdout, stderr, code := execute(t, probeCmd(), "-c", cfg, "mine")
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	r := rows(t, stdout)
	if len(r) != 1 || r["good"]["TCP4"] != "alive" {
		t.Fatalf("rows %v:\n%s", r, stdout)
	}
	if strings.Contains(stdout, "theirs") || !strings.Contains(stdout, "group mine (fallback): tcp → good via mine > good — ") {
		t.Fatalf("groups:\n%s", stdout)
	}
	if n := accepts.Load(); n != 0 {
		t.Fatalf("%d connections to the server of another group's node", n)
	}
}

// An outbound no group holds is probed when named.
func TestProbeCommandOfAnUngroupedOutbound(t *testing.T) {
	stdout, _, code := execute(t, probeCmd(), "-c", probeConfig(t, autoGroup), "bad")
	if r := rows(t, stdout); code != 2 || len(r) != 1 || r["bad"]["TCP4"] != "dead" {
		t.Fatalf("exit status %d:\n%s", code, stdout)
	}
	if strings.Contains(stdout, "group ") {
		t.Fatalf("a group reported:\n%s", stdout)
	}
}

// A bad configuration is refused with check's output and exit status 1,
// whether it fails to load or to build.
func TestProbeCommandRefusesABadConfigurationAsCheckDoes(t *testing.T) {
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{
		"load":  "[[outbounds]]\ntag = \"x\"\ntype = \"nope\"\n",
		"build": fmt.Sprintf("[[outbounds]]\ntag = \"up\"\ntype = \"socks\"\nserver = \"127.0.0.1:1\"\ntls = { ca_file = %q }\n\n[route]\nfinal = \"up\"\n", ca),
	} {
		cfg := filepath.Join(dir, name+".toml")
		if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, want, wantCode := execute(t, checkCmd(), "-c", cfg)
		stdout, got, code := execute(t, probeCmd(), "-c", cfg)
		if code != 1 || wantCode != 1 || got != want || got == "" || stdout != "" {
			t.Fatalf("%s: exit status %d (check %d); stderr:\n%s\ncheck's:\n%s", name, code, wantCode, got, want)
		}
	}
}

func TestProbeCommandUsageErrors(t *testing.T) {
	cfg := probeConfig(t, autoGroup)
	for _, args := range [][]string{{"-c", cfg, "nope"}, {"-c", cfg, "--bogus"}, {"auto"}} {
		stdout, stderr, code := execute(t, probeCmd(), args...)
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "switchyard probe: ") {
			t.Fatalf("%v: exit status %d; stdout %q; stderr %q", args, code, stdout, stderr)
		}
	}
}

const scoreGroup = `
[[outbounds]]
tag = "other"
type = "direct"

[[groups]]
tag = "smart"
policy = "score"
members = ["good", "other"]

[route]
final = "smart"
`

// A Score group's lines are each followed by its evidence summary —
// selection, question and wait, next flow, last reason, one line per
// challenger — in the text and under score in --json; other groups have
// none.
func TestProbeCommandPrintsAScoreGroupsEvidence(t *testing.T) {
	cfg := probeConfig(t, scoreGroup)
	stdout, stderr, code := execute(t, probeCmd(), "-c", cfg)
	if code != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{
		"group smart (score): tcp → good via smart > good — ",
		"    score: selected good, provisional, not observed usable; question ",
		"    member other: question ",
	} {
		if !strings.Contains(stdout, "\n"+want) {
			t.Fatalf("no line %q in:\n%s", want, stdout)
		}
	}
	if !strings.Contains(stdout, "; last reason ") || !strings.Contains(stdout, "; next flow ") {
		t.Fatalf("the summary lacks its next flow or last reason:\n%s", stdout)
	}
	stdout, _, _ = execute(t, probeCmd(), "-c", cfg, "--json")
	var rep struct {
		Groups []struct {
			TCP struct {
				Score *struct {
					Selected   string `json:"selected"`
					Question   string `json:"question"`
					WaitReason string `json:"wait_reason"`
					Members    []struct {
						Member     string `json:"member"`
						Question   string `json:"question"`
						WaitReason string `json:"wait_reason"`
					} `json:"members"`
					Relations []any `json:"relations"`
				} `json:"score"`
			} `json:"tcp"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	sc := rep.Groups[0].TCP.Score
	if sc == nil || sc.Selected != "good" || sc.Question == "" || sc.WaitReason == "" || sc.Relations == nil ||
		len(sc.Members) != 1 || sc.Members[0].Member != "other" || sc.Members[0].Question == "" {
		t.Fatalf("score: %+v\n%s", sc, stdout)
	}
	var v any
	json.Unmarshal([]byte(stdout), &v)
	keys := map[string]bool{}
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				keys[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	for k := range keys {
		if !strings.Contains(probeHelp, k) {
			t.Errorf("the help does not document %q", k)
		}
	}
	stdout, _, _ = execute(t, probeCmd(), "-c", probeConfig(t, autoGroup))
	if strings.Contains(stdout, "    score:") {
		t.Fatalf("a urltest group has a Score summary:\n%s", stdout)
	}
}
