package route

import (
	"testing"

	"switchyard/spec"
)

func TestCompileNames(t *testing.T) {
	cases := []struct {
		rule    spec.Rule
		yes, no []string
	}{
		{spec.Rule{}, nil, []string{"example.com", ""}},
		{spec.Rule{Domain: []string{"Example.com"}}, []string{"example.com", "EXAMPLE.COM."}, []string{"www.example.com"}},
		{spec.Rule{DomainSuffix: []string{".cn"}}, []string{"cn", "a.b.CN."}, []string{"acn", "cn.com"}},
		{spec.Rule{DomainKeyword: []string{"ads"}}, []string{"myads.net"}, []string{"example.org"}},
		{spec.Rule{DomainRegex: []string{`^api[0-9]+\.`}}, []string{"api7.example.org"}, []string{"api.example.org"}},
		{spec.Rule{Domain: []string{"a.com"}, DomainSuffix: []string{"b.com"}, Port: []uint16{53}}, []string{"a.com", "x.b.com"}, []string{"c.com"}},
	}
	for _, c := range cases {
		n, err := CompileNames(c.rule)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range c.yes {
			if !n.MatchName(name) {
				t.Errorf("%+v: %q does not match", c.rule, name)
			}
		}
		for _, name := range c.no {
			if n.MatchName(name) {
				t.Errorf("%+v: %q matches", c.rule, name)
			}
		}
	}
	if _, err := CompileNames(spec.Rule{DomainRegex: []string{"("}}); err == nil {
		t.Error("a bad regex compiled")
	}
	n, _ := CompileNames(spec.Rule{DomainSuffix: []string{"example.com"}})
	if a := testing.AllocsPerRun(100, func() { n.MatchName("www.example.com") }); a != 0 {
		t.Errorf("MatchName allocates %v times", a)
	}
}
