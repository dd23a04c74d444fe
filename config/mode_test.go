package config

import (
	"strings"
	"testing"
)

func TestRouteMode(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{"", "rule"},
		{"[route]\nmode = \"rule\"\n", "rule"},
		{"[route]\nmode = \"global\"\n", "global"},
		{"[route]\nmode = \"direct\"\n", "direct"},
	} {
		s, _, err := Parse([]byte(c.file), "mode.toml")
		if err != nil {
			t.Fatalf("%q: %v", c.file, err)
		}
		if s.Route.Mode != c.want {
			t.Fatalf("%q: mode %q, want %q", c.file, s.Route.Mode, c.want)
		}
	}
	_, _, err := Parse([]byte("[route]\nmode = \"script\"\n"), "mode.toml")
	if err == nil || !strings.Contains(err.Error(), `mode.toml:2: route.mode: "script" is not one of rule | global | direct`) {
		t.Fatalf("an unknown mode: %v", err)
	}
}

func TestGlobalTagIsReserved(t *testing.T) {
	for _, c := range []struct{ file, key string }{
		{"[[outbounds]]\ntag = \"GLOBAL\"\ntype = \"direct\"\n", "mode.toml:2: outbounds[0].tag"},
		{"[[outbounds]]\ntag = \"a\"\ntype = \"socks\"\nserver = \"127.0.0.1:1\"\n[[balancers]]\ntag = \"GLOBAL\"\nmembers = [\"a\"]\n", "mode.toml:6: balancers[0].tag"},
		{"[[groups]]\ntag = \"GLOBAL\"\npolicy = \"selector\"\nmembers = [\"direct\"]\n", "mode.toml:2: groups[0].tag"},
	} {
		_, _, err := Parse([]byte(c.file), "mode.toml")
		if err == nil || !strings.Contains(err.Error(), c.key+`: the tag "GLOBAL" is reserved`) {
			t.Fatalf("%q: %v", c.file, err)
		}
	}
	if _, _, err := Parse([]byte("[[groups]]\ntag = \"global\"\npolicy = \"selector\"\nmembers = [\"direct\"]\n"), "mode.toml"); err != nil {
		t.Fatalf("tags are case-sensitive: %v", err)
	}
}

// A reserved tag is one problem: what names it adds none.
func TestGlobalTagIsOneProblem(t *testing.T) {
	_, _, err := Parse([]byte("[[outbounds]]\ntag = \"GLOBAL\"\ntype = \"direct\"\n[route]\nfinal = \"GLOBAL\"\n"), "mode.toml")
	if err == nil || strings.Count(err.Error(), "GLOBAL") != 2 || strings.Contains(err.Error(), "unknown") {
		t.Fatalf("%v", err)
	}
}
