package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"switchyard/ruleset"
	"switchyard/spec"
)

// dns lowers [dns]; nil when the file has no such table. Outbounds must
// already be lowered: fake IPs are worth a warning when nothing answers
// queries with them.
func (l *lowerer) dns(f *fileDNS) *spec.DNS {
	if f == nil {
		return nil
	}
	d := &spec.DNS{
		Bootstrap: defaultDNSBootstrap,
		CacheSize: defaultDNSCacheSize,
		MinTTL:    defaultDNSMinTTL,
		MaxTTL:    defaultDNSMaxTTL,
		Timeout:   defaultDNSTimeout,
	}
	byName := false // some server is given by name
	servers := func(key string, vs []string) []string {
		out, named := l.dnsServerList(key, vs)
		byName = byName || named
		return out
	}

	const pair = "pre_proxy and through_proxy"
	switch {
	case f.Servers != nil:
		if len(f.Servers) == 0 {
			l.errorf("dns.servers", "must not be empty: give at least one server URL, or leave servers out for the system resolver")
		}
		d.Servers = servers("dns.servers", f.Servers)
		for _, k := range []struct {
			name string
			v    []string
		}{{"pre_proxy", f.PreProxy}, {"through_proxy", f.ThroughProxy}} {
			if k.v != nil {
				l.errorf("dns."+k.name, "servers (line %s) is one resolver for everything: give servers, or %s, not both",
					lineOf("dns.servers"), pair)
			}
		}
	case f.PreProxy != nil || f.ThroughProxy != nil:
		d.PreProxy = l.dnsSplit("dns.pre_proxy", f.PreProxy, "dns.through_proxy", servers)
		d.ThroughProxy = l.dnsSplit("dns.through_proxy", f.ThroughProxy, "dns.pre_proxy", servers)
	default:
		d.Servers = []string{defaultDNSServer}
	}
	if f.Serve != nil {
		d.Serve = *f.Serve
	}
	if f.Bootstrap != nil {
		d.Bootstrap = l.bootstrap("dns.bootstrap", *f.Bootstrap)
	}

	if n := f.CacheSize; n != nil {
		if *n < 1 || *n > maxDNSCacheSize {
			l.errorf("dns.cache_size", "%d is out of range 1..%d", *n, maxDNSCacheSize)
		} else {
			d.CacheSize = int(*n)
		}
	}
	minOK, maxOK := true, true
	if f.MinTTL != nil {
		problems := len(l.errs)
		d.MinTTL = l.nonNegativeDuration("dns.min_ttl", *f.MinTTL)
		minOK = len(l.errs) == problems
	}
	if f.MaxTTL != nil {
		if d.MaxTTL = l.positiveDuration("dns.max_ttl", *f.MaxTTL, ""); d.MaxTTL == 0 {
			d.MaxTTL, maxOK = defaultDNSMaxTTL, false
		}
	}
	if minOK && maxOK && d.MinTTL > d.MaxTTL {
		def := ""
		if f.MaxTTL == nil {
			def = ", the default"
		}
		l.errorf("dns.min_ttl", "%q is above max_ttl (%s%s): a cached answer's TTL is raised to min_ttl and capped at max_ttl",
			*f.MinTTL, d.MaxTTL.String(), def)
	}
	if f.Timeout != nil {
		if d.Timeout = l.positiveDuration("dns.timeout", *f.Timeout, ""); d.Timeout == 0 {
			d.Timeout = defaultDNSTimeout
		}
	}

	for i := range f.Rules {
		key := "dns.rules[" + strconv.Itoa(i) + "]"
		d.Rules = append(d.Rules, l.dnsRule(key, &f.Rules[i], servers))
	}
	d.FakeIP = l.fakeIP(f.FakeIP)

	if f.Bootstrap != nil && *f.Bootstrap != defaultDNSBootstrap && !byName {
		l.warnf("dns.bootstrap", "no DNS server is given by name: bootstrap is not used")
	}
	if d.FakeIP != nil && !d.Serve && !l.dnsOutbound && !l.tunHijack {
		l.warnf("dns.fakeip", "fake IPs are answers of the DNS service, and nothing asks it: "+
			"set serve = true or route flows to a dns outbound")
	}
	return d
}

// dnsSplit lowers one half of the pre_proxy and through_proxy pair: both
// are required when either is written.
func (l *lowerer) dnsSplit(key string, vs []string, other string, servers func(string, []string) []string) []string {
	switch {
	case vs == nil:
		l.errorf(key, "required key is missing (%s on line %s goes with it: they are a pair)",
			strings.TrimPrefix(other, "dns."), lineOf(other))
		return nil
	case len(vs) == 0:
		l.errorf(key, `must not be empty: give at least one server URL ("system" for the OS resolver)`)
	}
	return servers(key, vs)
}

// dnsServerList lowers a list of server URLs, refusing a server written
// twice; byName reports whether some server is given by name.
func (l *lowerer) dnsServerList(key string, vs []string) (out []string, byName bool) {
	seen := map[string]string{}
	eachString(key, vs, func(ekey, v string) {
		s, ok := l.dnsServer(ekey, v)
		if !ok {
			return
		}
		if first, dup := seen[s.url]; dup {
			l.errorf(ekey, "duplicate server %q (also %s)", v, first)
			return
		}
		seen[s.url] = ekey
		byName = byName || s.byName
		out = append(out, s.url)
	})
	return out, byName
}

// bootstrap lowers [dns].bootstrap: "system" or a udp:// or tcp:// server
// with an IP, since it resolves the names of the others.
func (l *lowerer) bootstrap(key, text string) string {
	if text == "system" {
		return text
	}
	scheme, _, found := strings.Cut(text, "://")
	if s := strings.ToLower(scheme); !found || s != "udp" && s != "tcp" {
		l.errorf(key, `%q is not a bootstrap server: use "system" or a udp:// or tcp:// URL with an IP address`, text)
		return defaultDNSBootstrap
	}
	s, ok := l.dnsServer(key, text)
	switch {
	case !ok:
		return defaultDNSBootstrap
	case s.byName:
		l.errorf(key, "%q names its host: a bootstrap server needs an IP address, since it resolves the names of the other servers", text)
		return defaultDNSBootstrap
	}
	return s.url
}

// dnsRule lowers one [[dns.rules]] table.
func (l *lowerer) dnsRule(key string, f *fileDNSRule, servers func(string, []string) []string) spec.DNSRule {
	var r spec.DNSRule
	matches := false
	if len(f.Domain) > 0 {
		r.Domain, matches = l.dnsNames(key+".domain", f.Domain, false), true
	}
	if len(f.DomainSuffix) > 0 {
		r.DomainSuffix, matches = l.dnsNames(key+".domain_suffix", f.DomainSuffix, true), true
	}
	if len(f.DomainKeyword) > 0 {
		r.DomainKeyword, matches = l.domains(key+".domain_keyword", f.DomainKeyword, false), true
	}
	if len(f.DomainRegex) > 0 {
		r.DomainRegex, matches = l.regexes(key+".domain_regex", f.DomainRegex), true
	}
	if f.RuleSet != nil {
		if len(f.RuleSet) == 0 {
			l.errorf(key+".rule_set", "must not be empty")
		}
		r.RuleSet, matches = l.ruleSetRefs(key+".rule_set", f.RuleSet), true
	}
	if !matches {
		l.errorf(key, "a DNS rule needs at least one name to match: domain, domain_suffix, domain_keyword, domain_regex or rule_set")
	}

	switch {
	case f.Action != nil:
		if !l.oneOf(key+".action", *f.Action, dnsActions) {
			if len(f.Servers) > 0 {
				servers(key+".servers", f.Servers)
			}
			break
		}
		r.Action = *f.Action
		r.BlockWith = l.enum(key+".block_with", f.BlockWith, defaultBlockWith, blockWiths)
		if f.Servers != nil {
			l.errorf(key+".servers", `a rule with action = "block" (line %s) asks no server: give servers or action = "block", not both`,
				lineOf(key+".action"))
		}
	case f.Servers == nil:
		l.errorf(key+".servers", `required key is missing (or action = "block")`)
	case len(f.Servers) == 0:
		l.errorf(key+".servers", `must not be empty: give at least one server URL, or action = "block"`)
	default:
		r.Servers = servers(key+".servers", f.Servers)
	}
	if f.BlockWith != nil && f.Action == nil {
		l.errorf(key+".block_with", `block_with goes with action = "block": a rule with servers answers what they answer`)
	}
	return r
}

// dnsNames lowers names as domains does (lower case; a suffix without one
// leading dot), and without one trailing dot: a question for
// "example.com." is a question for "example.com". A wildcard is refused
// (other formats write "*.lan" or "+.lan" for a suffix): it would match no
// name.
func (l *lowerer) dnsNames(key string, vs []string, suffix bool) []string {
	var out []string
	eachString(key, vs, func(ekey, v string) {
		if strings.Contains(v, "*") || suffix && strings.HasPrefix(v, "+.") {
			hint := "list the names themselves"
			if suffix {
				hint = "a suffix matches the name and every name under it"
				if rest := strings.TrimLeft(v, "*+."); rest != "" && !strings.Contains(rest, "*") {
					hint += fmt.Sprintf(": write %q", rest)
				}
			}
			l.errorf(ekey, "%q: wildcards are not taken; %s", v, hint)
			return
		}
		d := strings.TrimSuffix(strings.ToLower(v), ".")
		if suffix {
			d = strings.TrimPrefix(d, ".")
		}
		if d == "" {
			l.errorf(ekey, "must not be empty")
			return
		}
		out = append(out, d)
	})
	return out
}

// fakeIP lowers [dns.fakeip]; nil when the file has no such table.
func (l *lowerer) fakeIP(f *fileFakeIP) *spec.FakeIP {
	if f == nil {
		return nil
	}
	fk := &spec.FakeIP{}
	// room is the fewest addresses of the ranges written, the most
	// mappings they can hold, with the key and range that bound it.
	room, roomKey, roomRange := maxFakeIPSize, "", netip.Prefix{}
	for _, r := range []struct {
		key  string
		v    *string
		is4  bool
		bits int
		dst  *netip.Prefix
	}{
		{"dns.fakeip.ipv4", f.IPv4, true, maxFakeIPv4Bits, &fk.IPv4},
		{"dns.fakeip.ipv6", f.IPv6, false, maxFakeIPv6Bits, &fk.IPv6},
	} {
		if r.v == nil {
			continue
		}
		p, ok := l.fakeRange(r.key, *r.v, r.is4, r.bits)
		if !ok {
			continue
		}
		*r.dst = p
		if n := addresses(p, maxFakeIPSize); n < room {
			room, roomKey, roomRange = n, r.key, p
		}
	}
	if f.IPv4 == nil && f.IPv6 == nil {
		l.errorf("dns.fakeip", "a fake IP table needs ipv4 or ipv6 (or both): the ranges its addresses come from")
	}
	if len(f.Filter) > 0 {
		fk.Filter = l.dnsNames("dns.fakeip.fake_ip_filter", f.Filter, true)
	}
	fk.Size = min(defaultFakeIPSize, room)
	if n := f.Size; n != nil {
		switch {
		case *n < 1 || *n > maxFakeIPSize:
			l.errorf("dns.fakeip.size", "%d is out of range 1..%d", *n, maxFakeIPSize)
		case *n > int64(room):
			l.errorf("dns.fakeip.size", "%d is more than the %d addresses of %s (%s)",
				*n, room, strings.TrimPrefix(roomKey, "dns.fakeip."), roomRange.String())
		default:
			fk.Size = int(*n)
		}
	}
	return fk
}

// fakeRange lowers a fake IP range: a prefix of one family (masked) with
// at least 4 addresses.
func (l *lowerer) fakeRange(key, text string, is4 bool, maxBits int) (netip.Prefix, bool) {
	family, example := "IPv6", "fc00::/18"
	if is4 {
		family, example = "IPv4", "198.18.0.0/15"
	}
	p, ok := ruleset.ParsePrefix(text)
	switch {
	case !ok:
		l.errorf(key, "%q is not an %s prefix (such as %q)", text, family, example)
		return netip.Prefix{}, false
	case p.Addr().Is4() != is4:
		l.errorf(key, "%q is not an %s prefix (such as %q)", text, family, example)
		return netip.Prefix{}, false
	case p.Bits() > maxBits:
		l.errorf(key, "%q is too small for fake IPs: the prefix length is at most %d (4 addresses)", text, maxBits)
		return netip.Prefix{}, false
	}
	return p, true
}

// addresses is the number of addresses in p, or limit when it holds more.
func addresses(p netip.Prefix, limit int) int {
	host := p.Addr().BitLen() - p.Bits()
	if host >= 31 || 1<<host > limit {
		return limit
	}
	return 1 << host
}
