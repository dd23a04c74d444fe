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

// CompileNames compiles the domain keys of r; its other keys are ignored.
// A rule without domain keys compiles to a matcher of no name.
func CompileNames(r spec.Rule) (Names, error) {
	c, err := compileDomains(spec.Rule{
		Domain:        r.Domain,
		DomainSuffix:  r.DomainSuffix,
		DomainKeyword: r.DomainKeyword,
		DomainRegex:   r.DomainRegex,
	})
	if err != nil || c == nil {
		return Names{}, err
	}
	return Names{m: c.(nameMatcher)}, nil
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
