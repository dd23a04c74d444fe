package config

import (
	"errors"
	"strings"
	"testing"
)

func TestSOCKS4Key(t *testing.T) {
	for _, tc := range []struct {
		text string
		want bool
	}{
		{socksIn, false},
		{socksIn + "socks4 = true\nusers = [{ username = \"u\", password = \"p\" }]\n", true},
		{strings.Replace(socksIn, `"socks"`, `"mixed"`, 1) + "socks4 = true\n", true},
		{socksIn + "socks4 = false\n", false},
	} {
		s := mustParse(t, tc.text)
		if got := s.Inbounds[0].SOCKS4; got != tc.want {
			t.Errorf("%q: SOCKS4 = %v, want %v", tc.text, got, tc.want)
		}
	}

	for _, tc := range []struct {
		name, text string
		want       want
	}{
		{"on an http inbound", strings.Replace(socksIn, `"socks"`, `"http"`, 1) + "socks4 = true\n",
			want{5, "inbounds[0].socks4", "an http inbound has no SOCKS4"}},
		{"not a boolean", socksIn + "socks4 = \"yes\"\n", want{5, "inbounds[0].socks4", ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tc.text), "sy.toml")
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("err = %v, want one problem", err)
			}
			if e := errs[0]; e.Line != tc.want.line || e.Key != tc.want.key || !strings.Contains(e.Msg, tc.want.msg) {
				t.Fatalf("got %s, want line %d key %s ...%s...", e, tc.want.line, tc.want.key, tc.want.msg)
			}
		})
	}
	// socks4 = false on an http inbound says nothing wrong.
	mustParse(t, strings.Replace(socksIn, `"socks"`, `"http"`, 1)+"socks4 = false\n")
}
