package config

import (
	"testing"
	"time"

	"switchyard/spec"
)

// Outbounds the group tests name: two socks clients (lines 1-8).
const groupOutbounds = `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
[[outbounds]]
tag = "b"
type = "socks"
server = "127.0.0.1:1082"
`

func TestGroupDefaults(t *testing.T) {
	s := mustParse(t, groupOutbounds+`
[[groups]]
tag = "sel"
policy = "selector"
members = ["a", "b"]
[[groups]]
tag = "ut"
policy = "urltest"
members = ["a", "b"]
[[groups]]
tag = "fb"
policy = "fallback"
members = ["b", "a"]
[[groups]]
tag = "lb"
policy = "loadbalance"
members = ["a"]
`)
	want := []spec.Group{
		{Tag: "sel", Policy: "selector", Members: []string{"a", "b"}, Interrupt: true},
		{Tag: "ut", Policy: "urltest", Members: []string{"a", "b"}, Tolerance: 50 * time.Millisecond},
		{Tag: "fb", Policy: "fallback", Members: []string{"b", "a"}},
		{Tag: "lb", Policy: "loadbalance", Members: []string{"a"}},
	}
	if !spec.Equal(s.Groups, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Groups, want)
	}
}

func TestGroupKeys(t *testing.T) {
	s := mustParse(t, groupOutbounds+`
[[balancers]]
tag = "pool"
members = ["a", "b"]
[[groups]]
tag = "top"
policy = "selector"
members = ["inner", "pool", "a", "direct"]
default = "pool"
final = "block"
interrupt = false
use = []
check_url = ""
idle_timeout = "5m"
[[groups]]
tag = "inner"
policy = "urltest"
members = ["b", "a", "top"]
final = "top"
interrupt = true
tolerance = "0s"
check_url = "https://probe.example/204?x=1"
idle_timeout = "1h30m"
[[groups]]
tag = "fb"
policy = "fallback"
members = ["fb", "lb"]
final = "pool"
interrupt = true
check_url = "http://[2001:db8::1]:8080/"
[[groups]]
tag = "lb"
policy = "loadbalance"
members = ["fb"]
final = "fb"
idle_timeout = ""
[[rules]]
port = [443]
outbound = "inner"
[route]
final = "top"
`)
	want := []spec.Group{
		{Tag: "top", Policy: "selector", Members: []string{"inner", "pool", "a", "direct"}, Default: "pool",
			Final: "block", IdleTimeout: 5 * time.Minute},
		{Tag: "inner", Policy: "urltest", Members: []string{"b", "a", "top"}, Final: "top", Interrupt: true,
			CheckURL: "https://probe.example/204?x=1", IdleTimeout: 90 * time.Minute},
		{Tag: "fb", Policy: "fallback", Members: []string{"fb", "lb"}, Final: "pool", Interrupt: true,
			CheckURL: "http://[2001:db8::1]:8080/"},
		{Tag: "lb", Policy: "loadbalance", Members: []string{"fb"}, Final: "fb"},
	}
	if !spec.Equal(s.Groups, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Groups, want)
	}
	if s.Rules[0].Outbound != "inner" || s.Route.Final != "top" {
		t.Fatalf("rules %+v, route %+v", s.Rules, s.Route)
	}
}

// A score group is accepted with the keys every policy takes: check_url
// (its members' liveness, as for fallback), idle_timeout and final; its
// interrupt is ignored with a warning (it picks per flow and target).
func TestScoreGroup(t *testing.T) {
	text := groupOutbounds + `[[groups]]
tag = "inner"
policy = "score"
members = ["a", "b"]
[[groups]]
tag = "smart"
policy = "score"
members = ["inner", "a", "direct"]
final = "block"
check_url = "https://probe.example/204"
idle_timeout = "10m"
interrupt = true
[route]
final = "smart"
`
	s, warns, err := Parse([]byte(text), "sy.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := []spec.Group{
		{Tag: "inner", Policy: "score", Members: []string{"a", "b"}},
		{Tag: "smart", Policy: "score", Members: []string{"inner", "a", "direct"}, Final: "block",
			CheckURL: "https://probe.example/204", IdleTimeout: 10 * time.Minute},
	}
	if !spec.Equal(s.Groups, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Groups, want)
	}
	if len(warns) != 1 || warns[0].Error() != "sy.toml:20: groups[1].interrupt: a score group picks a member per flow and target and never closes flows: interrupt is ignored" {
		t.Fatalf("warnings %v", warns)
	}
}

// A selector takes check_url and ignores it, and a loadbalance group an
// interrupt: the spec has neither, and the load warns at their lines.
func TestIgnoredGroupKeysWarn(t *testing.T) {
	text := groupOutbounds + `[[groups]]
tag = "sel"
policy = "selector"
members = ["a"]
check_url = "https://probe.example/"
[[groups]]
tag = "sel2"
policy = "selector"
members = ["b"]
check_url = "http://probe.example/"
[[groups]]
tag = "lb"
policy = "loadbalance"
members = ["a"]
interrupt = true
[[groups]]
tag = "lb2"
policy = "loadbalance"
members = ["a"]
interrupt = false
`
	s, warns, err := Parse([]byte(text), "sy.toml")
	if err != nil {
		t.Fatal(err)
	}
	if s.Groups[0].CheckURL != "" || s.Groups[1].CheckURL != "" || s.Groups[2].Interrupt {
		t.Fatalf("an ignored key was kept: %+v", s.Groups)
	}
	wantText := []string{
		"sy.toml:13: groups[0].check_url: a selector group does not probe its members: check_url is ignored",
		"sy.toml:18: groups[1].check_url: a selector group does not probe its members: check_url is ignored",
		"sy.toml:23: groups[2].interrupt: a loadbalance group picks a member per flow and never closes flows: interrupt is ignored",
	}
	if len(warns) != len(wantText) {
		t.Fatalf("warnings %v, want %q", warns, wantText)
	}
	for i, w := range warns {
		if w.Error() != wantText[i] {
			t.Errorf("warning %d = %q, want %q", i, w, wantText[i])
		}
	}

	// A file that has problems returns them, not its warnings.
	_, warns, err = Parse([]byte(text+"[log]\nlevel = \"loud\"\n"), "sy.toml")
	if err == nil || warns != nil {
		t.Fatalf("err %v, warnings %v", err, warns)
	}
}

func TestGroupErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"score takes no tolerance and no default", groupOutbounds + `[[groups]]
tag = "g0"
policy = "selector"
members = ["a"]
[[groups]]
tag = "g1"
policy = "urltest"
members = ["a"]
[[groups]]
tag = "smart"
policy = "score"
members = ["a", "b"]
tolerance = "10ms"
default = "a"
`, []want{
			{21, "groups[2].tolerance", "a score group has no tolerance (only urltest groups have one)"},
			{22, "groups[2].default", "a score group has no default (only selector groups have one)"},
		}},

		{"a score group names no balancer", groupOutbounds + `[[balancers]]
tag = "pool"
members = ["a", "b"]
[[groups]]
tag = "smart"
policy = "score"
members = ["a", "pool"]
`, []want{
			{15, "groups[0].members[1]", `"pool" is a balancer: a score group ranks the nodes it can name, and a balancer picks its own; list the balancer's outbounds instead`},
		}},

		{"unknown, missing and empty policy", groupOutbounds + `[[groups]]
tag = "g0"
policy = "Selector"
members = ["a"]
[[groups]]
tag = "g1"
members = ["a"]
[[groups]]
tag = "g2"
policy = ""
members = ["a"]
`, []want{
			{11, "groups[0].policy", `"Selector" is not one of selector | urltest | fallback | loadbalance | score`},
			{13, "groups[1].policy", "required key is missing"},
			{18, "groups[2].policy", "must not be empty"},
		}},

		{"members missing, empty, unknown and repeated", groupOutbounds + `[[groups]]
tag = "g0"
policy = "fallback"
[[groups]]
tag = "g1"
policy = "fallback"
members = []
[[groups]]
tag = "g2"
policy = "loadbalance"
members = ["a", "nowhere", "b", "a", "", "g2"]
`, []want{
			{9, "groups[0].members", "required key is missing"},
			{15, "groups[1].members", "a group needs at least one member"},
			{19, "groups[2].members[1]", `unknown member "nowhere": no outbound, balancer or group has this tag`},
			{19, "groups[2].members[3]", `duplicate member "a" (also groups[2].members[0])`},
			{19, "groups[2].members[4]", `unknown member "": no outbound, balancer or group has this tag`},
		}},

		{"tags share one namespace with outbounds and balancers", groupOutbounds + `[[balancers]]
tag = "pool"
members = ["a"]
[[groups]]
tag = "a"
policy = "selector"
members = ["b"]
[[groups]]
tag = "pool"
policy = "selector"
members = ["b"]
[[groups]]
tag = "direct"
policy = "selector"
members = ["b"]
[[groups]]
tag = "g"
policy = "selector"
members = ["b"]
[[groups]]
tag = "g"
policy = "selector"
members = ["b"]
[[groups]]
policy = "selector"
members = ["b"]
[[groups]]
tag = ""
policy = "selector"
members = ["b"]
`, []want{
			{13, "groups[0].tag", `duplicate tag "a": the outbound on line 2 has it (outbounds, balancers and groups share one namespace)`},
			{17, "groups[1].tag", `duplicate tag "pool": the balancer on line 10 has it (outbounds, balancers and groups share one namespace)`},
			{21, "groups[2].tag", `duplicate tag "direct": the built-in direct outbound has it (outbounds, balancers and groups share one namespace)`},
			{29, "groups[4].tag", `duplicate group tag "g" (first declared on line 25)`},
			{32, "groups[5].tag", "required key is missing"},
			{36, "groups[6].tag", "must not be empty"},
		}},

		{"a group after an outbound declared further down", `[[groups]]
tag = "late"
policy = "fallback"
members = ["late"]
[[outbounds]]
tag = "late"
type = "direct"
`, []want{{2, "groups[0].tag", `duplicate tag "late": the outbound on line 6 has it`}}},

		{"default", groupOutbounds + `[[groups]]
tag = "g0"
policy = "selector"
members = ["a"]
default = "b"
[[groups]]
tag = "g1"
policy = "selector"
members = ["a"]
default = ""
[[groups]]
tag = "g2"
policy = "urltest"
members = ["a"]
default = "a"
[[groups]]
tag = "g3"
policy = "fallback"
members = ["a"]
default = "a"
tolerance = "1s"
`, []want{
			{13, "groups[0].default", `"b" is not a member of this group`},
			{18, "groups[1].default", "must not be empty (leave default out for the first member)"},
			{23, "groups[2].default", "a urltest group has no default (only selector groups have one)"},
			{28, "groups[3].default", "a fallback group has no default (only selector groups have one)"},
			{29, "groups[3].tolerance", "a fallback group has no tolerance (only urltest groups have one)"},
		}},

		{"final", groupOutbounds + `[[groups]]
tag = "g0"
policy = "selector"
members = ["a"]
final = "g0"
[[groups]]
tag = "g1"
policy = "urltest"
members = ["a"]
final = "nowhere"
[[groups]]
tag = "g2"
policy = "loadbalance"
members = ["a"]
final = ""
`, []want{
			{13, "groups[0].final", "a group cannot be its own final"},
			{18, "groups[1].final", `unknown final "nowhere": no outbound, balancer or group has this tag`},
			{23, "groups[2].final", "must not be empty (leave final out for no final)"},
		}},

		{"use names a provider no [[providers]] has", groupOutbounds + `[[groups]]
tag = "g0"
policy = "urltest"
members = ["a"]
use = ["sub"]
`, []want{{13, "groups[0].use[0]",
			`unknown provider "sub": no [[providers]] has this tag`}}},

		{"interrupt written as a string", groupOutbounds + `[[groups]]
tag = "g0"
policy = "urltest"
members = ["a"]
interrupt = "yes"
`, []want{{13, "groups[0].interrupt", "expected a boolean, found a string"}}},

		{"tolerance, idle_timeout and check_url values", groupOutbounds + `[[groups]]
tag = "g0"
policy = "urltest"
members = ["a"]
tolerance = "-1ms"
idle_timeout = "0s"
check_url = "ftp://probe.example/"
[[groups]]
tag = "g1"
policy = "urltest"
members = ["a"]
tolerance = "fast"
idle_timeout = "soon"
check_url = "https://"
[[groups]]
tag = "g2"
policy = "selector"
members = ["a"]
check_url = "probe.example/generate_204"
`, []want{
			{13, "groups[0].tolerance", `"-1ms" must not be negative`},
			{14, "groups[0].idle_timeout", `"0s" must be above zero; use "" for [health].idle_timeout`},
			{15, "groups[0].check_url", `"ftp://probe.example/" is not an http or https URL (such as "https://www.gstatic.com/generate_204")`},
			{20, "groups[1].tolerance", `"fast" is not a duration (such as "50ms" or "1s")`},
			{21, "groups[1].idle_timeout", `"soon" is not a duration`},
			{22, "groups[1].check_url", `"https://" is not an http or https URL`},
			{27, "groups[2].check_url", `"probe.example/generate_204" is not an http or https URL`},
		}},

		{"unknown keys", groupOutbounds + `[[groups]]
tag = "g0"
policy = "urltest"
members = ["a"]
provider = ["sub"]
Tolerance = "1s"
`, []want{
			{13, "groups[0].provider", `unknown key "provider"`},
			{14, "groups[0].Tolerance", `unknown key "Tolerance" (keys are case-sensitive: did you mean "tolerance"?)`},
		}},

		{"rules and route may name groups, not unknown tags", groupOutbounds + `[[groups]]
tag = "g0"
policy = "selector"
members = ["a"]
[[rules]]
port = [1]
outbound = "g1"
[route]
final = "g1"
`, []want{
			{15, "rules[0].outbound", `unknown outbound "g1"`},
			{17, "route.final", `unknown outbound "g1"`},
		}},

		{"a balancer's members are outbounds, not groups", groupOutbounds + `[[groups]]
tag = "g0"
policy = "selector"
members = ["a"]
[[balancers]]
tag = "pool"
members = ["g0"]
`, []want{{15, "balancers[0].members[0]", "balancer pool references unknown outbound g0"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.text, tc.want) })
	}
}
