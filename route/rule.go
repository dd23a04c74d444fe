// Package route matches flows against rules and sniffs the first bytes of a
// flow for a domain and a protocol.
package route

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"switchyard/netx"
	"switchyard/spec"
)

// Rule is a compiled [[rules]] entry: every set key must match (AND), any
// value of a key may match (OR).
type Rule struct {
	matchers []matcher
}

type matcher func(f *netx.Flow) bool

// Compile turns a spec rule into matchers. The loader has validated the rule;
// an error here means a value the loader let through does not compile.
func Compile(r spec.Rule) (*Rule, error) {
	var ms []matcher
	if len(r.Inbound) > 0 {
		set := toSet(r.Inbound)
		ms = append(ms, func(f *netx.Flow) bool { _, ok := set[f.Inbound]; return ok })
	}
	switch r.Network {
	case "":
	case "tcp":
		ms = append(ms, func(f *netx.Flow) bool { return f.Network == netx.TCP })
	case "udp":
		ms = append(ms, func(f *netx.Flow) bool { return f.Network == netx.UDP })
	default:
		return nil, fmt.Errorf("unknown network %q", r.Network)
	}
	if d, err := compileDomains(r); err != nil {
		return nil, err
	} else if d != nil {
		ms = append(ms, d.match)
	}
	if len(r.IPCIDR) > 0 {
		prefixes := r.IPCIDR
		ms = append(ms, func(f *netx.Flow) bool {
			return f.Dst.IP.IsValid() && containsAny(prefixes, f.Dst.IP)
		})
	}
	if len(r.SourceIPCIDR) > 0 {
		prefixes := r.SourceIPCIDR
		ms = append(ms, func(f *netx.Flow) bool {
			return f.Src.IsValid() && containsAny(prefixes, f.Src.Addr().Unmap())
		})
	}
	if len(r.Port) > 0 || len(r.PortRange) > 0 {
		ports := make(map[uint16]struct{}, len(r.Port))
		for _, p := range r.Port {
			ports[p] = struct{}{}
		}
		ranges := r.PortRange
		ms = append(ms, func(f *netx.Flow) bool {
			if _, ok := ports[f.Dst.Port]; ok {
				return true
			}
			for _, pr := range ranges {
				if f.Dst.Port >= pr.Lo && f.Dst.Port <= pr.Hi {
					return true
				}
			}
			return false
		})
	}
	if len(r.User) > 0 {
		set := toSet(r.User)
		ms = append(ms, func(f *netx.Flow) bool { _, ok := set[f.User]; return ok && f.User != "" })
	}
	if len(r.Protocol) > 0 {
		set := toSet(r.Protocol)
		ms = append(ms, func(f *netx.Flow) bool { _, ok := set[f.Protocol]; return ok && f.Protocol != "" })
	}
	return &Rule{matchers: ms}, nil
}

// Match reports whether f satisfies every key of the rule.
func (r *Rule) Match(f *netx.Flow) bool {
	for _, m := range r.matchers {
		if !m(f) {
			return false
		}
	}
	return true
}

// domains matches the flow's destination name, or the sniffed domain when the
// client connected by IP (or named another host).
type domains struct {
	exact    map[string]struct{}
	suffixes []string
	keywords []string
	regexps  []*regexp.Regexp
}

func compileDomains(r spec.Rule) (*domains, error) {
	if len(r.Domain)+len(r.DomainSuffix)+len(r.DomainKeyword)+len(r.DomainRegex) == 0 {
		return nil, nil
	}
	d := &domains{exact: make(map[string]struct{}, len(r.Domain))}
	for _, s := range r.Domain {
		d.exact[strings.ToLower(s)] = struct{}{}
	}
	for _, s := range r.DomainSuffix {
		d.suffixes = append(d.suffixes, strings.TrimPrefix(strings.ToLower(s), "."))
	}
	for _, s := range r.DomainKeyword {
		d.keywords = append(d.keywords, strings.ToLower(s))
	}
	for _, s := range r.DomainRegex {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("domain_regex %q: %w", s, err)
		}
		d.regexps = append(d.regexps, re)
	}
	return d, nil
}

func (d *domains) match(f *netx.Flow) bool {
	if f.Dst.Name != "" && d.matchName(f.Dst.Name) {
		return true
	}
	return f.Sniffed != "" && d.matchName(f.Sniffed)
}

func (d *domains) matchName(name string) bool {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if _, ok := d.exact[name]; ok {
		return true
	}
	for _, s := range d.suffixes {
		if name == s || (strings.HasSuffix(name, s) && name[len(name)-len(s)-1] == '.') {
			return true
		}
	}
	for _, k := range d.keywords {
		if strings.Contains(name, k) {
			return true
		}
	}
	for _, re := range d.regexps {
		if re.MatchString(name) {
			return true
		}
	}
	return false
}

func containsAny(prefixes []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func toSet(xs []string) map[string]struct{} {
	m := make(map[string]struct{}, len(xs))
	for _, x := range xs {
		m[x] = struct{}{}
	}
	return m
}
