package main

import (
	"strings"
	"testing"
	"time"

	"switchyard/remote"
	"switchyard/spec"
)

func TestAPIBase(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9090": "http://127.0.0.1:9090",
		"0.0.0.0:9090":   "http://127.0.0.1:9090",
		"[::]:9090":      "http://[::1]:9090",
		":9090":          "http://127.0.0.1:9090",
		"[::1]:9090":     "http://[::1]:9090",
	} {
		if got := apiBase(&spec.API{Listen: in}); got != want {
			t.Errorf("apiBase(%q) = %q, want %q", in, got, want)
		}
	}
}

// The downloads of a spec are its url providers and rule sets, each with
// a Validate that refuses what must not replace its cache.
func TestResources(t *testing.T) {
	s := &spec.Spec{
		Providers: []spec.Provider{{Tag: "file", Path: "/x"}, {Tag: "sub", URL: "https://a.example/", Interval: time.Hour, Via: "direct", CachePath: "/c/sub"}},
		RuleSets:  []spec.RuleSet{{Tag: "ads", URL: "https://a.example/ads", Format: "clash-ipcidr", Via: "direct", CachePath: "/c/ads"}},
	}
	rs := resources(s)
	if len(rs) != 2 || rs[0].Kind != remote.KindProvider || rs[0].Tag != "sub" || rs[0].Interval != time.Hour || rs[1].Kind != remote.KindRuleSet {
		t.Fatalf("resources %+v", rs)
	}
	if n, err := rs[0].Validate([]byte("socks5://127.0.0.1:1#A\nsocks5://127.0.0.1:2#B\n")); err != nil || n != 2 {
		t.Fatalf("a good subscription: %d %v", n, err)
	}
	if _, err := rs[0].Validate([]byte("<html>maintenance</html>")); err == nil {
		t.Fatal("a maintenance page was accepted")
	}
	if _, err := rs[0].Validate([]byte("proxies:\n  - {name: x, type: tuic, server: a, port: 1}\n")); err == nil || !strings.Contains(err.Error(), "none of its 1 nodes") {
		t.Fatalf("a subscription of unconvertible nodes: %v", err)
	}
	if n, err := rs[1].Validate([]byte("10.0.0.0/8\n1.1.1.1/32\n")); err != nil || n != 2 {
		t.Fatalf("a good rule set: %d %v", n, err)
	}
	if _, err := rs[1].Validate([]byte("not an address\n")); err == nil {
		t.Fatal("a broken rule set was accepted")
	}
}
