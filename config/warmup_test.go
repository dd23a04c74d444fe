package config

import (
	"errors"
	"strings"
	"testing"

	"switchyard/spec"
)

func TestWarmupKeys(t *testing.T) {
	tests := []struct {
		name, text string
		want       spec.Warmup
	}{
		{"defaults", "", spec.Warmup{Preconnect: spec.PreconnectAuto, SelectorPin: true}},
		{"auto", "[warmup]\npreconnect = \"auto\"\n", spec.Warmup{Preconnect: 8, SelectorPin: true}},
		{"a count", "[warmup]\npreconnect = 3\nudp_warm_set = 2\n", spec.Warmup{Preconnect: 3, UDPWarmSet: 2, SelectorPin: true}},
		{"all off", "[warmup]\npreconnect = 0\nudp_warm_set = 0\nselector_pin = false\n", spec.Warmup{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, err := Parse([]byte(tc.text), "sy.toml")
			if err != nil {
				t.Fatal(err)
			}
			if s.Warmup != tc.want {
				t.Fatalf("warmup = %+v, want %+v", s.Warmup, tc.want)
			}
		})
	}
}

func TestWarmupErrors(t *testing.T) {
	tests := []struct {
		name, text string
		want       want
	}{
		{"another string", "[warmup]\n\npreconnect = \"always\"\n", want{3, "warmup.preconnect", `"always" is neither "auto" nor an integer`}},
		{"a negative count", "[warmup]\npreconnect = -1\n", want{2, "warmup.preconnect", "-1 is out of range 0.."}},
		{"a boolean", "[warmup]\npreconnect = true\n", want{2, "warmup.preconnect", `must be "auto" or an integer`}},
		{"a negative warm set", "[warmup]\nudp_warm_set = -2\n", want{2, "warmup.udp_warm_set", "-2 is out of range 0.."}},
		{"a string warm set", "[warmup]\nudp_warm_set = \"3\"\n", want{2, "warmup.udp_warm_set", "integer"}},
		{"a string pin", "[warmup]\nselector_pin = \"yes\"\n", want{2, "warmup.selector_pin", "boolean"}},
		{"an unknown key", "[warmup]\npreconect = 2\n", want{2, "warmup.preconect", `unknown key "preconect"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tc.text), "sy.toml")
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("want one problem, got %v", err)
			}
			e := errs[0]
			if e.Line != tc.want.line || e.Key != tc.want.key || !strings.Contains(e.Msg, tc.want.msg) {
				t.Fatalf("got %s; want line %d, key %s, text with %s", e, tc.want.line, tc.want.key, tc.want.msg)
			}
		})
	}
}
