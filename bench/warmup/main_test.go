package main

import (
	"strings"
	"testing"
	"time"
)

func TestQuantile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var ds []time.Duration
		for _, x := range v {
			ds = append(ds, time.Duration(x)*time.Millisecond)
		}
		return ds
	}
	ds := ms(10, 1, 9, 2, 8, 3, 7, 4, 6, 5)
	for _, c := range []struct {
		q    float64
		want int
	}{{0.5, 5}, {0.9, 9}, {1, 10}, {0, 1}} {
		if got := quantile(ds, c.q); got != time.Duration(c.want)*time.Millisecond {
			t.Errorf("q%.1f = %v, want %dms", c.q, got, c.want)
		}
	}
	if got := quantile(nil, 0.5); got != 0 {
		t.Errorf("empty: %v", got)
	}
	if ds[0] != 10*time.Millisecond {
		t.Error("quantile sorted its argument")
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-xray", "x", "-switchyard", "s", "-clients", "switchyard warm,switchyard unpaced,xray", "-quick"})
	if err != nil {
		t.Fatal(err)
	}
	if c.runs != 5 || c.nodes != 10 || c.gap != time.Second || strings.Join(c.clients, "|") != "switchyard warm|switchyard unpaced|xray" {
		t.Fatalf("quick: %+v", c)
	}
	if _, err := parseFlags([]string{"-xray", "x", "-switchyard", "s", "-clients", "curl"}); err == nil {
		t.Error("an unknown client was taken")
	}
	if _, err := parseFlags([]string{"-xray", "x", "-switchyard", "s"}); err == nil {
		t.Error("sing-box measured without -singbox")
	}
}

// The memory phase's nodes are each an identity of their own (an account
// of their own) and all members of both groups; off spells warm-up off,
// on leaves the defaults.
func TestNodesConfig(t *testing.T) {
	l := &lab{c: &config{nodes: 4}, warmInBuild: true, cert: "/c.pem", serverAddr: "10.213.0.2:8443", trojanServer: "10.213.0.2:9443"}
	on, off := l.switchyardNodes("127.0.0.1:1080", true), l.switchyardNodes("127.0.0.1:1080", false)
	if strings.Contains(on, "[warmup]") || !strings.Contains(off, "preconnect = 0\nselector_pin = false") {
		t.Fatalf("warm-up tables: on\n%s\noff\n%s", on, off)
	}
	members := `members = ["node-00", "node-01", "node-02", "node-03"]`
	if strings.Count(on, members) != 2 || strings.Count(on, `type = "vless"`) != 2 || strings.Count(on, `type = "trojan"`) != 2 {
		t.Fatalf("nodes:\n%s", on)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(on, "\n") {
		if strings.HasPrefix(line, "uuid = ") || strings.HasPrefix(line, "password = ") {
			if seen[line] {
				t.Fatalf("two nodes share %s", line)
			}
			seen[line] = true
		}
	}
	if len(seen) != 4 {
		t.Fatalf("%d accounts for 4 nodes", len(seen))
	}
}
