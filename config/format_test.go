package config

import (
	"errors"
	"testing"
)

func TestErrorText(t *testing.T) {
	text := `[log]
level = "info"

[[outbounds]]
tag = "a"
type = "direct"

[[outbounds]]
tag = "b"
type = "tuic"

[[inbounds]]
tag = "in"
type = "socks"
lisen = "127.0.0.1:1080"
`
	_, _, err := Parse([]byte(text), "sy.toml")
	wantText := `sy.toml:10: outbounds[1].type: unknown outbound type "tuic"
sy.toml:12: inbounds[0].listen: required key is missing
sy.toml:15: inbounds[0].lisen: unknown key "lisen"`
	if err == nil || err.Error() != wantText {
		t.Fatalf("got:\n%v\nwant:\n%s", err, wantText)
	}
	var one *Error
	if !errors.As(err, &one) || one.Line != 10 {
		t.Fatalf("errors.As(*Error) = %v", one)
	}
}

func TestErrorFormat(t *testing.T) {
	for _, tc := range []struct {
		e    Error
		want string
	}{
		{Error{File: "sy.toml", Line: 7, Key: "outbounds[1].type", Msg: "m"}, "sy.toml:7: outbounds[1].type: m"},
		{Error{File: "sy.toml", Key: "route.final", Msg: "m"}, "sy.toml: route.final: m"},
		{Error{File: "sy.toml", Line: 3, Msg: "m"}, "sy.toml:3: m"},
		{Error{Line: 3, Key: "k", Msg: "m"}, "line 3: k: m"},
	} {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
