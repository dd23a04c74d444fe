package route

import (
	"strings"

	"switchyard/spec"
)

// Names matches a bare domain name against the domain keys of a rule
// (domain, domain_suffix, domain_keyword, domain_regex), with the same
// semantics as a [[rules]] entry: the name is compared ASCII-lowercased,
// without its final dot, and any value of any key may match. It is what
// the DNS rules pick a resolver with; a flow is not needed to ask it, so
// matching a name allocates nothing.
type Names struct {
	m nameMatcher // nil: no domain key, matches nothing
}

// nameMatcher is implemented by every domain condition.
type nameMatcher interface {
	matchName(name string) bool
}

// CompileNames compiles the domain keys of r and the domain rules of its
// rule sets (a name matches either); its other keys are ignored. A rule
// without domain keys or rule sets compiles to a matcher of no name.
func CompileNames(r spec.Rule) (Names, error) {
	c, err := compileDomains(spec.Rule{
		Domain:        r.Domain,
		DomainSuffix:  r.DomainSuffix,
		DomainKeyword: r.DomainKeyword,
		DomainRegex:   r.DomainRegex,
	})
	if err != nil {
		return Names{}, err
	}
	var m anyName
	if c != nil {
		m = append(m, c.(nameMatcher))
	}
	if len(r.RuleSet) > 0 {
		sets, err := loadSets(r.RuleSet)
		if err != nil {
			return Names{}, err
		}
		m = append(m, sets)
	}
	switch len(m) {
	case 0:
		return Names{}, nil
	case 1:
		return Names{m: m[0]}, nil
	}
	return Names{m: m}, nil
}

// anyName matches a name one of its matchers does.
type anyName []nameMatcher

func (a anyName) matchName(n string) bool {
	for _, m := range a {
		if m.matchName(n) {
			return true
		}
	}
	return false
}

// MatchName reports whether name satisfies one of the domain keys.
func (n Names) MatchName(name string) bool {
	return n.m != nil && n.m.matchName(normalName(name))
}

// Empty reports whether the matcher has no domain key (and so matches no
// name).
func (n Names) Empty() bool { return n.m == nil }

func (d domainIs) matchName(n string) bool      { return n == string(d) }
func (s domainSuffix) matchName(n string) bool  { return hasSuffix(n, string(s)) }
func (k domainKeyword) matchName(n string) bool { return strings.Contains(n, string(k)) }
