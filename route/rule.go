// Package route matches flows against rules and sniffs the first bytes of a
// flow for a domain and a protocol.
package route

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"github.com/gaissmai/bart"

	"switchyard/netx"
	"switchyard/ruleset"
	"switchyard/spec"
)

// Rule is a compiled [[rules]] entry: every set key must match (AND), any
// value of a key may match (OR). A rule is held by value in the plane; its
// conditions are small values, and the common rule of one key with one
// value is one condition holding that value (a suffix, a prefix, a port),
// with no set or slice of its own: a plane of many rules costs little more
// than their values.
type Rule struct {
	conds []condition
}

// condition is one key of a rule.
type condition interface {
	match(f *netx.Flow) bool
}

// Compile turns a spec rule into conditions. The loader has validated the
// rule; an error here means a value the loader let through does not compile.
func Compile(r spec.Rule) (Rule, error) {
	var cs []condition
	add := func(c condition) {
		if cs == nil {
			cs = make([]condition, 0, keys(r))
		}
		cs = append(cs, c)
	}
	if len(r.Inbound) > 0 {
		add(inboundIn{newStringSet(r.Inbound)})
	}
	switch r.Network {
	case "":
	case "tcp":
		add(networkIs(netx.TCP))
	case "udp":
		add(networkIs(netx.UDP))
	default:
		return Rule{}, fmt.Errorf("unknown network %q", r.Network)
	}
	if d, err := compileDomains(r); err != nil {
		return Rule{}, err
	} else if d != nil {
		add(d)
	}
	switch n := len(r.IPCIDR); {
	case n == 0:
	case n == 1:
		add(dstPrefix(r.IPCIDR[0]))
	case n <= smallSet:
		add(dstPrefixes(r.IPCIDR))
	default:
		add(dstTable{prefixTable(r.IPCIDR)})
	}
	switch n := len(r.SourceIPCIDR); {
	case n == 0:
	case n <= smallSet:
		add(srcPrefixes(r.SourceIPCIDR))
	default:
		add(srcTable{prefixTable(r.SourceIPCIDR)})
	}
	switch {
	case len(r.Port) == 1 && len(r.PortRange) == 0:
		add(portIs(r.Port[0]))
	case len(r.Port) == 0 && len(r.PortRange) == 1:
		add(portIn(r.PortRange[0]))
	case len(r.Port) > 0 || len(r.PortRange) > 0:
		add(&ports{ports: newPortSet(r.Port), ranges: r.PortRange})
	}
	if len(r.User) > 0 {
		add(userIn{newStringSet(r.User)})
	}
	if len(r.Protocol) > 0 {
		add(protocolIn{newStringSet(r.Protocol)})
	}
	if len(r.GeoIP) > 0 {
		g, err := ruleset.LoadGeoIP(r.GeoIPPath)
		if err != nil {
			return Rule{}, fmt.Errorf("geoip: %w", err)
		}
		add(dstTable{g.Table(r.GeoIP)})
	}
	if len(r.RuleSet) > 0 {
		sets, err := loadSets(r.RuleSet)
		if err != nil {
			return Rule{}, err
		}
		add(sets)
	}
	return Rule{conds: cs}, nil
}

// keys is the number of conditions r compiles to.
func keys(r spec.Rule) int {
	n := 0
	for _, set := range []bool{
		len(r.Inbound) > 0, r.Network != "",
		len(r.Domain)+len(r.DomainSuffix)+len(r.DomainKeyword)+len(r.DomainRegex) > 0,
		len(r.IPCIDR) > 0, len(r.SourceIPCIDR) > 0, len(r.Port)+len(r.PortRange) > 0,
		len(r.User) > 0, len(r.Protocol) > 0, len(r.RuleSet) > 0, len(r.GeoIP) > 0,
	} {
		if set {
			n++
		}
	}
	return n
}

// Match reports whether f satisfies every key of the rule.
func (r *Rule) Match(f *netx.Flow) bool {
	for _, c := range r.conds {
		if !c.match(f) {
			return false
		}
	}
	return true
}

type networkIs netx.Network

func (n networkIs) match(f *netx.Flow) bool { return f.Network == netx.Network(n) }

type inboundIn struct{ stringSet }

func (s inboundIn) match(f *netx.Flow) bool { return s.has(f.Inbound) }

type userIn struct{ stringSet }

func (s userIn) match(f *netx.Flow) bool { return f.User != "" && s.has(f.User) }

type protocolIn struct{ stringSet }

func (s protocolIn) match(f *netx.Flow) bool { return f.Protocol != "" && s.has(f.Protocol) }

type dstPrefix netip.Prefix

func (p dstPrefix) match(f *netx.Flow) bool {
	return f.Dst.IP.IsValid() && netip.Prefix(p).Contains(f.Dst.IP.Unmap())
}

type dstPrefixes []netip.Prefix

func (ps dstPrefixes) match(f *netx.Flow) bool {
	return f.Dst.IP.IsValid() && containsAny(ps, f.Dst.IP)
}

// dstTable and srcTable hold a list of more than a few prefixes in a
// prefix table: a lookup does not grow with the list.
type dstTable struct{ t *bart.Lite }

func (d dstTable) match(f *netx.Flow) bool {
	return d.t != nil && f.Dst.IP.IsValid() && d.t.Lookup(f.Dst.IP.Unmap())
}

type srcTable struct{ t *bart.Lite }

func (s srcTable) match(f *netx.Flow) bool {
	return f.Src.IsValid() && s.t.Lookup(f.Src.Addr().Unmap())
}

func prefixTable(ps []netip.Prefix) *bart.Lite {
	t := new(bart.Lite)
	for _, p := range ps {
		t.Insert(p)
	}
	return t
}

// ruleSets matches when one of its rule sets does.
type ruleSets []*ruleset.Set

func (rs ruleSets) match(f *netx.Flow) bool {
	for _, s := range rs {
		if s.Match(f) {
			return true
		}
	}
	return false
}

func (rs ruleSets) matchName(n string) bool {
	for _, s := range rs {
		if s.MatchName(n) {
			return true
		}
	}
	return false
}

// loadSets loads the compiled rule sets (reused while their files are
// unchanged). A downloaded rule set not downloaded yet (no Path) matches
// nothing: it is left out, and a rule whose sets are all such matches no
// flow.
func loadSets(refs []spec.RuleSet) (ruleSets, error) {
	out := make(ruleSets, 0, len(refs))
	for _, ref := range refs {
		if ref.Path == "" {
			continue
		}
		s, err := ruleset.Load(ref.Path, ref.Format)
		if err != nil {
			return nil, fmt.Errorf("rule set %q: %w", ref.Tag, err)
		}
		out = append(out, s)
	}
	return out, nil
}

type srcPrefixes []netip.Prefix

func (ps srcPrefixes) match(f *netx.Flow) bool {
	return f.Src.IsValid() && containsAny(ps, f.Src.Addr().Unmap())
}

type portIs uint16

func (p portIs) match(f *netx.Flow) bool { return f.Dst.Port == uint16(p) }

type portIn spec.PortRange

func (r portIn) match(f *netx.Flow) bool { return f.Dst.Port >= r.Lo && f.Dst.Port <= r.Hi }

type ports struct {
	ports  portSet
	ranges []spec.PortRange
}

func (p *ports) match(f *netx.Flow) bool {
	if p.ports.has(f.Dst.Port) {
		return true
	}
	for _, r := range p.ranges {
		if f.Dst.Port >= r.Lo && f.Dst.Port <= r.Hi {
			return true
		}
	}
	return false
}

// smallSet is the size up to which a set is a slice searched in order: for
// a few values that is faster than a map and a fraction of its size.
const smallSet = 8

// stringSet is a set of strings: a slice when small, else a map.
type stringSet struct {
	list []string
	m    map[string]struct{}
}

func newStringSet(xs []string) stringSet {
	if len(xs) <= smallSet {
		return stringSet{list: xs}
	}
	m := make(map[string]struct{}, len(xs))
	for _, x := range xs {
		m[x] = struct{}{}
	}
	return stringSet{m: m}
}

func (s stringSet) has(x string) bool {
	if s.m != nil {
		_, ok := s.m[x]
		return ok
	}
	for _, y := range s.list {
		if x == y {
			return true
		}
	}
	return false
}

// portSet is a set of ports: a slice when small, else a map.
type portSet struct {
	list []uint16
	m    map[uint16]struct{}
}

func newPortSet(ps []uint16) portSet {
	if len(ps) <= smallSet {
		return portSet{list: ps}
	}
	m := make(map[uint16]struct{}, len(ps))
	for _, p := range ps {
		m[p] = struct{}{}
	}
	return portSet{m: m}
}

func (s portSet) has(p uint16) bool {
	if s.m != nil {
		_, ok := s.m[p]
		return ok
	}
	for _, q := range s.list {
		if p == q {
			return true
		}
	}
	return false
}

// A domain condition matches the flow's destination name, or the sniffed
// domain when the client connected by IP (or named another host). One
// domain key with one value is a condition of its own; anything else is a
// domains set.
type (
	domainIs      string
	domainSuffix  string
	domainKeyword string
)

func (d domainIs) match(f *netx.Flow) bool {
	return eachName(f, func(n string) bool { return n == string(d) })
}

func (s domainSuffix) match(f *netx.Flow) bool {
	return eachName(f, func(n string) bool { return hasSuffix(n, string(s)) })
}

func (k domainKeyword) match(f *netx.Flow) bool {
	return eachName(f, func(n string) bool { return strings.Contains(n, string(k)) })
}

// eachName reports whether the destination name or the sniffed domain,
// lowercased and without a final dot, satisfies ok.
func eachName(f *netx.Flow, ok func(name string) bool) bool {
	if f.Dst.Name != "" && ok(normalName(f.Dst.Name)) {
		return true
	}
	return f.Sniffed != "" && ok(normalName(f.Sniffed))
}

func normalName(name string) string { return strings.ToLower(strings.TrimSuffix(name, ".")) }

// hasSuffix reports whether name is s or ends in "." + s.
func hasSuffix(name, s string) bool {
	return name == s || (strings.HasSuffix(name, s) && name[len(name)-len(s)-1] == '.')
}

// domains is a set of domain keys compiled as a rule set's are: a lookup
// does not grow with the number of names.
type domains struct{ d *ruleset.Domains }

func compileDomains(r spec.Rule) (condition, error) {
	n := len(r.Domain) + len(r.DomainSuffix) + len(r.DomainKeyword) + len(r.DomainRegex)
	switch {
	case n == 0:
		return nil, nil
	case n == 1 && len(r.Domain) == 1:
		return domainIs(strings.ToLower(r.Domain[0])), nil
	case n == 1 && len(r.DomainSuffix) == 1:
		return domainSuffix(strings.TrimPrefix(strings.ToLower(r.DomainSuffix[0]), ".")), nil
	case n == 1 && len(r.DomainKeyword) == 1:
		return domainKeyword(strings.ToLower(r.DomainKeyword[0])), nil
	}
	var b ruleset.DomainBuilder
	for _, s := range r.Domain {
		b.Exact(s)
	}
	for _, s := range r.DomainSuffix {
		b.Suffix(s)
	}
	for _, s := range r.DomainKeyword {
		b.Keyword(s)
	}
	for _, s := range r.DomainRegex {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("domain_regex %q: %w", s, err)
		}
		b.Regexp(re)
	}
	return &domains{b.Build()}, nil
}

func (d *domains) match(f *netx.Flow) bool { return eachName(f, d.matchName) }

func (d *domains) matchName(name string) bool { return d.d.MatchName(name) }

func containsAny(prefixes []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
