package config

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"

	"switchyard/ruleset"
	"switchyard/spec"
)

// rules lowers [[rules]]. Inbound and outbound tags must already be recorded.
// Only the keys a rule has are looked at (a rule has one or two of them), so
// a file of many rules builds no key text for the keys it leaves out.
func (l *lowerer) rules(fs []fileRule) []spec.Rule {
	if len(fs) == 0 {
		return nil
	}
	out := make([]spec.Rule, 0, len(fs))
	for i := range fs {
		f := &fs[i]
		key := "rules[" + strconv.Itoa(i) + "]"
		var r spec.Rule
		if len(f.Inbound) > 0 {
			r.Inbound = l.inboundRefs(key+".inbound", f.Inbound)
		}
		if len(f.Domain) > 0 {
			r.Domain = l.domains(key+".domain", f.Domain, false)
		}
		if len(f.DomainSuffix) > 0 {
			r.DomainSuffix = l.domains(key+".domain_suffix", f.DomainSuffix, true)
		}
		if len(f.DomainKeyword) > 0 {
			r.DomainKeyword = l.domains(key+".domain_keyword", f.DomainKeyword, false)
		}
		if len(f.DomainRegex) > 0 {
			r.DomainRegex = l.regexes(key+".domain_regex", f.DomainRegex)
		}
		if len(f.IPCIDR) > 0 {
			r.IPCIDR = l.prefixes(key+".ip_cidr", f.IPCIDR)
		}
		if len(f.SourceIPCIDR) > 0 {
			r.SourceIPCIDR = l.prefixes(key+".source_ip_cidr", f.SourceIPCIDR)
		}
		if len(f.Port) > 0 {
			r.Port = l.ports(key+".port", f.Port)
		}
		if len(f.PortRange) > 0 {
			r.PortRange = l.portRanges(key+".port_range", f.PortRange)
		}
		if len(f.User) > 0 {
			r.User = l.nonEmpty(key+".user", f.User)
		}
		if len(f.Protocol) > 0 {
			r.Protocol = l.enumList(key+".protocol", f.Protocol, protocols)
		}
		if len(f.RuleSet) > 0 {
			r.RuleSet = l.ruleSetRefs(key+".rule_set", f.RuleSet)
		}
		if len(f.GeoIP) > 0 {
			r.GeoIP, r.GeoIPPath = l.geoIPCodes(key+".geoip", f.GeoIP), l.geoIPPath
		}
		if f.Network != "" && l.oneOf(key+".network", f.Network, networks) {
			r.Network = f.Network
		}
		if tag, ok := l.required(key+".outbound", f.Outbound); ok {
			l.outboundRef(key+".outbound", tag)
			r.Outbound = tag
		}
		out = append(out, r)
	}
	return out
}

// eachString calls fn with the key of every element of vs.
func eachString(key string, vs []string, fn func(ekey, v string)) {
	for i, v := range vs {
		fn(key+"["+strconv.Itoa(i)+"]", v)
	}
}

func (l *lowerer) nonEmpty(key string, vs []string) []string {
	var out []string
	eachString(key, vs, func(ekey, v string) {
		if v == "" {
			l.errorf(ekey, "must not be empty")
			return
		}
		out = append(out, v)
	})
	return out
}

func (l *lowerer) inboundRefs(key string, vs []string) []string {
	var out []string
	eachString(key, vs, func(ekey, v string) {
		if _, ok := l.inboundTags[v]; !ok {
			l.errorf(ekey, "unknown inbound %q", v)
		}
		out = append(out, v)
	})
	return out
}

func (l *lowerer) enumList(key string, vs []string, allowed []string) []string {
	var out []string
	eachString(key, vs, func(ekey, v string) {
		if l.oneOf(ekey, v, allowed) {
			out = append(out, v)
		}
	})
	return out
}

// domains lowercases names; for a suffix, one leading dot is dropped
// (".example.com" and "example.com" are the same suffix).
func (l *lowerer) domains(key string, vs []string, suffix bool) []string {
	var out []string
	eachString(key, vs, func(ekey, v string) {
		d := strings.ToLower(v)
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

func (l *lowerer) regexes(key string, vs []string) []string {
	var out []string
	eachString(key, vs, func(ekey, v string) {
		if _, err := regexp.Compile(v); err != nil {
			l.errorf(ekey, "bad regex %q: %s", v, strings.TrimPrefix(err.Error(), "error parsing regexp: "))
			return
		}
		out = append(out, v)
	})
	return out
}

// prefixes parses CIDR prefixes, masked. A bare IP is a single-address
// prefix. An IPv4-mapped IPv6 prefix becomes its IPv4 form, since flows
// carry IPv4 addresses unmapped.
func (l *lowerer) prefixes(key string, vs []string) []netip.Prefix {
	var out []netip.Prefix
	eachString(key, vs, func(ekey, v string) {
		p, ok := ruleset.ParsePrefix(v)
		if !ok {
			l.errorf(ekey, "%q is not an IP prefix (such as \"10.0.0.0/8\", \"fd00::/8\") or an IP address", v)
			return
		}
		out = append(out, p)
	})
	return out
}

func (l *lowerer) ports(key string, vs []int64) []uint16 {
	var out []uint16
	for i, v := range vs {
		if v < 0 || v > 65535 {
			l.errorf(fmt.Sprintf("%s[%d]", key, i), "port %d is out of range 0..65535", v)
			continue
		}
		out = append(out, uint16(v))
	}
	return out
}

func (l *lowerer) portRanges(key string, vs []string) []spec.PortRange {
	var out []spec.PortRange
	eachString(key, vs, func(ekey, v string) {
		loText, hiText, found := strings.Cut(v, ":")
		lo, errLo := strconv.ParseUint(loText, 10, 16)
		hi, errHi := strconv.ParseUint(hiText, 10, 16)
		switch {
		case !found || errLo != nil || errHi != nil:
			l.errorf(ekey, "%q is not a port range \"low:high\" of ports 0..65535", v)
		case lo > hi:
			l.errorf(ekey, "%q: the low port is above the high port", v)
		default:
			out = append(out, spec.PortRange{Lo: uint16(lo), Hi: uint16(hi)})
		}
	})
	return out
}
