// Package ruleset loads rule sets (sing-box source JSON, Clash rule
// providers) and compiles them into matchers whose lookup cost does not grow
// with the number of entries: exact names and suffixes in hash sets walked
// label by label, keywords in an Aho-Corasick automaton, CIDRs in a prefix
// table. Regular expressions are kept as they are.
package ruleset

import (
	"regexp"
	"strings"
)

// Domains matches a name (lowercase, without the final dot) against exact
// names, suffixes, keywords and regular expressions: any one may match.
// A lookup costs one hash probe per label of the name plus one pass of the
// name through the keyword automaton, whatever the number of entries.
type Domains struct {
	exact   map[string]struct{}
	suffix  map[string]struct{}
	sub     map[string]struct{} // strict subdomains of each entry
	label   map[string]struct{} // names one label under each entry
	kw      *keywords
	regexps []*regexp.Regexp
}

// DomainBuilder collects entries for a Domains.
type DomainBuilder struct {
	exact, suffix []string
	sub, label    []string
	keywords      []string
	regexps       []*regexp.Regexp
}

// Exact adds a name matched exactly.
func (b *DomainBuilder) Exact(s string) { b.exact = append(b.exact, normal(s)) }

// Suffix adds a suffix: the name itself and every name under it. A leading
// dot is dropped.
func (b *DomainBuilder) Suffix(s string) {
	b.suffix = append(b.suffix, strings.TrimPrefix(normal(s), "."))
}

// Subdomains adds the names under s, not s itself (Clash's ".s").
func (b *DomainBuilder) Subdomains(s string) { b.sub = append(b.sub, normal(s)) }

// OneLabel adds the names exactly one label under s (Clash's "*.s").
func (b *DomainBuilder) OneLabel(s string) { b.label = append(b.label, normal(s)) }

// Keyword adds a substring.
func (b *DomainBuilder) Keyword(s string) { b.keywords = append(b.keywords, normal(s)) }

// Regexp adds a regular expression.
func (b *DomainBuilder) Regexp(re *regexp.Regexp) { b.regexps = append(b.regexps, re) }

// Len is the number of entries added.
func (b *DomainBuilder) Len() int {
	return len(b.exact) + len(b.suffix) + len(b.sub) + len(b.label) + len(b.keywords) + len(b.regexps)
}

// Build compiles the entries; nil when there are none.
func (b *DomainBuilder) Build() *Domains {
	if b.Len() == 0 {
		return nil
	}
	d := &Domains{regexps: b.regexps, exact: hashSet(b.exact), suffix: hashSet(b.suffix),
		sub: hashSet(b.sub), label: hashSet(b.label)}
	if len(b.keywords) > 0 {
		d.kw = newKeywords(b.keywords)
	}
	return d
}

func hashSet(xs []string) map[string]struct{} {
	if len(xs) == 0 {
		return nil
	}
	m := make(map[string]struct{}, len(xs))
	for _, x := range xs {
		m[x] = struct{}{}
	}
	return m
}

func normal(s string) string { return strings.ToLower(strings.TrimSuffix(s, ".")) }

// MatchName reports whether name (lowercase, no final dot) matches.
func (d *Domains) MatchName(name string) bool {
	if d == nil {
		return false
	}
	if d.exact != nil {
		if _, ok := d.exact[name]; ok {
			return true
		}
	}
	if d.suffix != nil {
		for s := name; ; {
			if _, ok := d.suffix[s]; ok {
				return true
			}
			i := strings.IndexByte(s, '.')
			if i < 0 {
				break
			}
			s = s[i+1:]
		}
	}
	if d.sub != nil || d.label != nil {
		if i := strings.IndexByte(name, '.'); i >= 0 {
			parent := name[i+1:]
			if _, ok := d.label[parent]; ok {
				return true
			}
			for s := parent; d.sub != nil; {
				if _, ok := d.sub[s]; ok {
					return true
				}
				j := strings.IndexByte(s, '.')
				if j < 0 {
					break
				}
				s = s[j+1:]
			}
		}
	}
	if d.kw != nil && d.kw.match(name) {
		return true
	}
	for _, re := range d.regexps {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

// keywords is an Aho-Corasick automaton over bytes: one pass of the name
// finds whether any keyword occurs in it. Transitions are stored sparsely,
// sorted by byte, per state.
type keywords struct {
	states []acState
}

type acState struct {
	edges []acEdge
	fail  int32
	out   bool
}

type acEdge struct {
	b  byte
	to int32
}

func (s *acState) next(b byte) int32 {
	for _, e := range s.edges {
		if e.b == b {
			return e.to
		}
	}
	return -1
}

func newKeywords(ws []string) *keywords {
	k := &keywords{states: []acState{{}}}
	for _, w := range ws {
		cur := int32(0)
		for i := 0; i < len(w); i++ {
			n := k.states[cur].next(w[i])
			if n < 0 {
				n = int32(len(k.states))
				k.states = append(k.states, acState{})
				k.states[cur].edges = append(k.states[cur].edges, acEdge{w[i], n})
			}
			cur = n
		}
		k.states[cur].out = true
	}
	// Breadth-first: each state's failure link is the longest proper
	// suffix of its path that is also a path from the root.
	queue := make([]int32, 0, len(k.states))
	for _, e := range k.states[0].edges {
		queue = append(queue, e.to)
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, e := range k.states[s].edges {
			f := k.states[s].fail
			for {
				if n := k.states[f].next(e.b); n >= 0 && n != e.to {
					k.states[e.to].fail = n
					break
				}
				if f == 0 {
					k.states[e.to].fail = 0
					break
				}
				f = k.states[f].fail
			}
			if k.states[k.states[e.to].fail].out {
				k.states[e.to].out = true
			}
			queue = append(queue, e.to)
		}
	}
	return k
}

func (k *keywords) match(s string) bool {
	if k.states[0].out { // the empty keyword
		return true
	}
	cur := int32(0)
	for i := 0; i < len(s); i++ {
		for {
			if n := k.states[cur].next(s[i]); n >= 0 {
				cur = n
				break
			}
			if cur == 0 {
				break
			}
			cur = k.states[cur].fail
		}
		if k.states[cur].out {
			return true
		}
	}
	return false
}
