package main

import (
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-xray", "x", "-switchyard", "s", "-quick", "-policies", "score, urltest"})
	if err != nil {
		t.Fatal(err)
	}
	if c.rounds != 8 || strings.Join(c.policies, "|") != "score|urltest" || c.open != 4 || c.blocked != 2 || c.lead != 0 {
		t.Fatalf("quick: %+v", c)
	}
	if c, err := parseFlags([]string{"-xray", "x", "-switchyard", "s", "-quick", "-rounds", "30"}); err != nil || c.rounds != 30 {
		t.Fatalf("-rounds given with -quick: %+v %v", c, err)
	}
	for _, bad := range [][]string{
		{"-switchyard", "s"},
		{"-xray", "x", "-switchyard", "s", "-blocked", "0"},
		{"-xray", "x", "-switchyard", "s", "-policies", " , "},
		{"-xray", "x", "-switchyard", "s", "extra"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}
