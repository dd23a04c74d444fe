// Package ruleset loads rule sets (sing-box source JSON and binary .srs,
// Clash rule providers) and compiles them into matchers whose lookup cost
// does not grow with the number of entries: names in a label trie held as
// one byte arena and an open-addressing hash table (one probe per label of
// the name), keywords in an Aho-Corasick automaton, CIDRs in hash sets of
// masked addresses per prefix length (IPv4 of few lengths) or a prefix
// table. Regular expressions are kept as they are. Logical rules (and, or,
// not, nested) are compiled into matchers evaluated per flow.
//
// Memory (bench/rulesets/run.sh, BenchmarkMatchAtScale, BenchmarkLoadSRS):
// 200,000 domain suffixes and 50,000 CIDRs hold 4.3 MB of heap (12.9 MB
// with a hash set of strings per kind and bart for the CIDRs), a lookup
// costs 15-290 ns (on a shared machine) and no allocation, and loading their .srs allocates
// 10.4 MB in all, its transients included (122 MB when the trie was
// decoded into strings first). A process holding the set peaks at 0.57
// and holds 0.66 times the resident memory of sing-box holding the same
// .srs.
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
	names   nameTable
	kw      *keywords
	regexps []*regexp.Regexp
}

// DomainBuilder collects entries for a Domains. Names go straight into
// the table; nothing is kept per entry but the table's record.
type DomainBuilder struct {
	names    nameTable
	entries  int
	keywords []string
	regexps  []*regexp.Regexp
	buf      []byte
}

// Grow readies the builder for about n more names.
func (b *DomainBuilder) Grow(n int) {
	if b.names.arena == nil {
		b.names.init(n)
	}
}

func (b *DomainBuilder) add(kind byte, s string) {
	b.buf = append(b.buf[:0], s...)
	b.addBytes(kind, b.buf)
}

// addBytes adds name, lowercase and without its final dot.
func (b *DomainBuilder) addBytes(kind byte, name []byte) {
	b.Grow(16)
	if b.names.add(kind, name) {
		b.entries++
	}
}

// Exact adds a name matched exactly.
func (b *DomainBuilder) Exact(s string) { b.add(kindExact, normal(s)) }

// Suffix adds a suffix: the name itself and every name under it. A leading
// dot is dropped.
func (b *DomainBuilder) Suffix(s string) {
	b.add(kindSuffix, strings.TrimPrefix(normal(s), "."))
}

// Subdomains adds the names under s, not s itself (Clash's ".s").
func (b *DomainBuilder) Subdomains(s string) { b.add(kindSub, normal(s)) }

// OneLabel adds the names exactly one label under s (Clash's "*.s").
func (b *DomainBuilder) OneLabel(s string) { b.add(kindLabel, normal(s)) }

// Keyword adds a substring.
func (b *DomainBuilder) Keyword(s string) { b.keywords = append(b.keywords, normal(s)) }

// Regexp adds a regular expression.
func (b *DomainBuilder) Regexp(re *regexp.Regexp) { b.regexps = append(b.regexps, re) }

// Len is the number of entries added.
func (b *DomainBuilder) Len() int { return b.entries + len(b.keywords) + len(b.regexps) }

// Build compiles the entries; nil when there are none. The builder is
// empty afterwards.
func (b *DomainBuilder) Build() *Domains {
	if b.Len() == 0 {
		return nil
	}
	d := &Domains{names: b.names, regexps: b.regexps}
	if d.names.arena != nil {
		d.names.trim()
	}
	if len(b.keywords) > 0 {
		d.kw = newKeywords(b.keywords)
	}
	*b = DomainBuilder{}
	return d
}

func normal(s string) string { return strings.ToLower(strings.TrimSuffix(s, ".")) }

// MatchName reports whether name (lowercase, no final dot) matches.
func (d *Domains) MatchName(name string) bool {
	if d == nil {
		return false
	}
	if d.names.match(name) {
		return true
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
