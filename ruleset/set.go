package ruleset

import (
	"net/netip"
	"regexp"
	"strings"
	"unicode/utf8"

	"switchyard/netx"
)

// headless is one rule of a rule set as a parser read it, before
// compiling: sing-box's headless rule. The destination keys (domain*,
// ip_cidr) are one group, any of which may match (sing-box's semantics);
// the other keys must each match too. A logical rule has only logical set.
type headless struct {
	line          int // where the rule is written, for errors
	domain        []string
	domainSuffix  []string
	subdomains    []string // Clash ".x"
	oneLabel      []string // Clash "*.x"
	domainKeyword []string
	domainRegex   []*regexp.Regexp
	tries         []*srsTrie // .srs domain items, walked when compiled
	ipCIDR        []netip.Prefix
	ipSets        []srsIPSet // .srs ip_cidr items, read when compiled
	srcCIDR       []netip.Prefix
	srcSets       []srsIPSet
	port          []uint16
	portRange     []portRange
	srcPort       []uint16
	srcPortRange  []portRange
	network       []netx.Network
	invert        bool
	logical       *logical
}

// logical is sing-box's logical rule (Clash's AND, OR, NOT): its rules
// all (and) or any (or) matching, the result inverted if invert.
type logical struct {
	and    bool
	rules  []headless
	invert bool
}

// maxDepth bounds the nesting of logical rules (sing-box's bound).
const maxDepth = 100

type portRange struct{ lo, hi uint16 }

func (h *headless) destOnly() bool {
	return !h.invert && h.logical == nil &&
		len(h.srcCIDR)+len(h.srcSets)+len(h.port)+len(h.portRange)+len(h.srcPort)+len(h.srcPortRange)+len(h.network) == 0
}

func (h *headless) hasDest() bool {
	return len(h.domain)+len(h.domainSuffix)+len(h.subdomains)+len(h.oneLabel)+len(h.domainKeyword)+
		len(h.domainRegex)+len(h.tries)+len(h.ipCIDR)+len(h.ipSets) > 0
}

// conditions reports whether a default rule has a key besides invert.
func (h *headless) conditions() bool {
	return h.hasDest() || h.logical != nil ||
		len(h.srcCIDR)+len(h.srcSets)+len(h.port)+len(h.portRange)+len(h.srcPort)+len(h.srcPortRange)+len(h.network) > 0
}

// entries counts the domain and CIDR entries of the rule and its rules.
func (h *headless) entries() int {
	n := len(h.domain) + len(h.domainSuffix) + len(h.subdomains) + len(h.oneLabel) + len(h.domainKeyword) +
		len(h.domainRegex) + len(h.ipCIDR)
	for _, t := range h.tries {
		n += t.keys
	}
	for _, s := range h.ipSets {
		n += s.n
	}
	if h.logical != nil {
		for i := range h.logical.rules {
			n += h.logical.rules[i].entries()
		}
	}
	return n
}

func (h *headless) addDomains(b *DomainBuilder) {
	for _, t := range h.tries {
		t.addTo(b)
	}
	for _, s := range h.domain {
		b.Exact(s)
	}
	for _, s := range h.domainSuffix {
		b.Suffix(s)
	}
	for _, s := range h.subdomains {
		b.Subdomains(s)
	}
	for _, s := range h.oneLabel {
		b.OneLabel(s)
	}
	for _, s := range h.domainKeyword {
		b.Keyword(s)
	}
	for _, re := range h.domainRegex {
		b.Regexp(re)
	}
}

// dest is a destination group: a flow matches when its name matches names
// or its destination IP is in ips.
type dest struct {
	names *Domains
	ips   *ipTable
}

func (d *dest) empty() bool { return d.names == nil && d.ips == nil }

func (d *dest) match(f *netx.Flow) bool {
	if d.names != nil {
		if f.Dst.Name != "" && d.names.MatchName(normalName(f.Dst.Name)) {
			return true
		}
		if f.Sniffed != "" && d.names.MatchName(normalName(f.Sniffed)) {
			return true
		}
	}
	return d.ips != nil && f.Dst.IP.IsValid() && d.ips.Lookup(f.Dst.IP.Unmap())
}

func normalName(n string) string {
	n = strings.TrimSuffix(n, ".")
	for i := 0; i < len(n); i++ {
		if c := n[i]; 'A' <= c && c <= 'Z' || c >= utf8.RuneSelf {
			return strings.ToLower(n) // n itself when no letter changes
		}
	}
	return n
}

func prefixTable(ps []netip.Prefix, sets []srsIPSet) *ipTable {
	var b ipBuilder
	b.addAll(ps, sets)
	return b.Build()
}

// matcher is a compiled rule.
type matcher interface {
	match(f *netx.Flow) bool
}

// rule is a compiled rule with keys beyond the destination group.
type rule struct {
	dest    dest
	hasDest bool
	src     *ipTable
	port    ports
	srcPort ports
	network []netx.Network
	invert  bool
}

type ports struct {
	set    map[uint16]struct{}
	ranges []portRange
}

func newPorts(ps []uint16, rs []portRange) ports {
	if len(ps)+len(rs) == 0 {
		return ports{}
	}
	p := ports{ranges: rs, set: make(map[uint16]struct{}, len(ps))}
	for _, x := range ps {
		p.set[x] = struct{}{}
	}
	return p
}

func (p *ports) any() bool { return p.set != nil }

func (p *ports) has(x uint16) bool {
	if _, ok := p.set[x]; ok {
		return true
	}
	for _, r := range p.ranges {
		if x >= r.lo && x <= r.hi {
			return true
		}
	}
	return false
}

func (r *rule) match(f *netx.Flow) bool {
	return r.matchKeys(f) != r.invert
}

func (r *rule) matchKeys(f *netx.Flow) bool {
	if len(r.network) > 0 {
		ok := false
		for _, n := range r.network {
			ok = ok || f.Network == n
		}
		if !ok {
			return false
		}
	}
	if r.src != nil && (!f.Src.IsValid() || !r.src.Lookup(f.Src.Addr().Unmap())) {
		return false
	}
	if r.port.any() && !r.port.has(f.Dst.Port) {
		return false
	}
	if r.srcPort.any() && (!f.Src.IsValid() || !r.srcPort.has(f.Src.Port())) {
		return false
	}
	return !r.hasDest || r.dest.match(f)
}

// andOr is a compiled logical rule.
type andOr struct {
	and    bool
	rules  []matcher
	invert bool
}

func (l *andOr) match(f *netx.Flow) bool {
	r := l.and
	for _, m := range l.rules {
		if m.match(f) != l.and {
			r = !l.and
			break
		}
	}
	return r != l.invert
}

// Set is a compiled rule set: it matches a flow when any of its rules
// does. The rules of destination keys only, the bulk of any real list,
// are merged into one destination group, and so are those of a top-level
// "or"; the others are tried in order.
type Set struct {
	dest    dest
	rules   []matcher
	entries int
}

// compiler builds a Set from rules given one at a time, so that a parser
// need not hold them all.
type compiler struct {
	names   DomainBuilder
	ips     ipBuilder
	rules   []matcher
	entries int
}

func (c *compiler) add(h *headless) {
	switch {
	case h.logical != nil && !h.logical.and && !h.logical.invert:
		for i := range h.logical.rules {
			c.add(&h.logical.rules[i])
		}
	case h.destOnly():
		c.entries += h.entries()
		h.addDomains(&c.names)
		c.ips.addAll(h.ipCIDR, h.ipSets)
	default:
		c.entries += h.entries()
		c.rules = append(c.rules, compileRule(h))
	}
}

func (c *compiler) finish() *Set {
	return &Set{dest: dest{names: c.names.Build(), ips: c.ips.Build()}, rules: c.rules, entries: c.entries}
}

func compileRule(h *headless) matcher {
	if l := h.logical; l != nil {
		m := &andOr{and: l.and, invert: l.invert, rules: make([]matcher, len(l.rules))}
		for i := range l.rules {
			m.rules[i] = compileRule(&l.rules[i])
		}
		return m
	}
	var b DomainBuilder
	h.addDomains(&b)
	return &rule{
		dest:    dest{names: b.Build(), ips: prefixTable(h.ipCIDR, h.ipSets)},
		hasDest: h.hasDest(),
		src:     prefixTable(h.srcCIDR, h.srcSets),
		port:    newPorts(h.port, h.portRange),
		srcPort: newPorts(h.srcPort, h.srcPortRange),
		network: h.network,
		invert:  h.invert,
	}
}

// compile is the Set of hs.
func compile(hs []headless) *Set {
	var c compiler
	for i := range hs {
		c.add(&hs[i])
	}
	return c.finish()
}

// Match reports whether any rule of the set matches f.
func (s *Set) Match(f *netx.Flow) bool {
	if !s.dest.empty() && s.dest.match(f) {
		return true
	}
	for _, r := range s.rules {
		if r.match(f) {
			return true
		}
	}
	return false
}

// MatchName reports whether name (lowercase, without the final dot)
// matches a domain key of a rule that has nothing but destination keys:
// what a DNS question can be asked, having no flow.
func (s *Set) MatchName(name string) bool { return s.dest.names.MatchName(name) }

// Entries is the number of domain and CIDR entries the set holds.
func (s *Set) Entries() int { return s.entries }
