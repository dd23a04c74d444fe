package importer

import (
	"strconv"
	"strings"
	"time"
)

// parseDuration reads a Go duration, and sing-box's "d" for days.
func parseDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseInt(d, 10, 64); err == nil && n > 0 && n < 1e5 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	return time.ParseDuration(s)
}

// sbDestKeys are the rule keys sing-box ORs with each other (the
// destination address); sbPortKeys the ports. switchyard ANDs every key of
// a rule, so a rule with several of one group becomes one rule per key.
var (
	sbDestKeys = []string{"domain", "domain_suffix", "domain_keyword", "domain_regex", "ip_cidr", "ip_is_private"}
	sbPortKeys = []string{"port", "port_range"}
	sbAndKeys  = []string{"source_ip_cidr", "network", "rule_set", "inbound", "protocol", "auth_user"}
)

// sbRoute converts route.rules and route.final.
func (c *conv) sbRoute(route *jnode) {
	if route == nil {
		return
	}
	for _, r := range route.list("rules") {
		c.sbRule(r)
	}
	if f := route.s("final"); f != "" {
		if tg, why := c.target(f); tg != "" {
			section(&c.route, "route").set("final", tg)
		} else {
			c.report(route.lineOf("final"), "route.final", "not converted: %s", why)
		}
	}
	route.each(func(k string, v *jnode) {
		switch k {
		case "rules", "final", "rule_set", "auto_detect_interface", "default_domain_resolver", "find_process":
		case "default_mark":
			if n, ok := route.int(k); ok && n > 0 {
				section(&c.socket, "socket").set("mark", n)
			}
		case "default_interface":
			if s := route.s(k); s != "" {
				section(&c.socket, "socket").set("interface", s)
			}
		default:
			c.report(v.line, "route."+k, "not converted: switchyard has no equivalent")
		}
	})
}

func (c *conv) sbRule(r *jnode) {
	item := "route rule"
	if r.boolean("invert") {
		c.report(r.line, item, "not converted: invert has no switchyard equivalent")
		return
	}
	var target string
	switch a := r.s("action"); a {
	case "", "route":
		if c.dnsTags[r.s("outbound")] {
			c.sbHijack(r)
			return
		}
		tg, why := c.target(r.s("outbound"))
		if tg == "" {
			c.report(r.line, item, "not converted: outbound: %s", why)
			return
		}
		target = tg
	case "reject":
		target = "block"
	case "hijack-dns":
		c.sbHijack(r)
		return
	case "sniff":
		c.sbSniff(r)
		return
	default:
		c.report(r.line, item, "not converted: action %q has no switchyard equivalent", a)
		return
	}
	conds, ok := c.sbConds(r, item, 0)
	if !ok {
		return
	}
	for _, keys := range conds {
		if len(keys) == 0 {
			section(&c.route, "route").set("final", target)
			c.report(r.line, item, "a rule without a condition matches everything: it becomes [route].final")
			continue
		}
		c.addRule(keys, target)
	}
}

// maxRuleSplit bounds the rules one sing-box rule becomes.
const maxRuleSplit = 64

// sbConds converts a rule's conditions into alternatives, each the keys of
// one [[rules]] table (an empty one matches everything): a default rule's
// destination and port keys, which sing-box ORs, give one alternative
// each; a logical or rule the alternatives of its rules; a logical and
// rule their combinations, when no two conditions of one kind meet.
func (c *conv) sbConds(r *jnode, item string, depth int) ([][]kv, bool) {
	if r.s("type") == "logical" {
		if depth > 4 || r.boolean("invert") {
			c.report(r.line, item, "not converted: a logical rule nested this deep, or inverted, has no switchyard equivalent")
			return nil, false
		}
		var subs [][][]kv
		for _, sub := range r.list("rules") {
			if sub.boolean("invert") {
				c.report(sub.line, item, "not converted: invert has no switchyard equivalent")
				return nil, false
			}
			alts, ok := c.sbConds(sub, item, depth+1)
			if !ok {
				return nil, false
			}
			subs = append(subs, alts)
		}
		if len(subs) == 0 {
			c.report(r.line, item, "not converted: a logical rule without rules")
			return nil, false
		}
		switch r.s("mode") {
		case "or":
			var out [][]kv
			for _, alts := range subs {
				out = append(out, alts...)
			}
			return out, len(out) <= maxRuleSplit || c.tooMany(r, item)
		case "and":
			out := [][]kv{{}}
			for _, alts := range subs {
				var ok bool
				if out, ok = c.cross(r, item, out, alts, "not converted: two conditions of one kind must both match, and a switchyard key matches any of its values"); !ok {
					return nil, false
				}
			}
			return out, true
		}
		c.report(r.line, item, "not converted: logical mode %q (and, or)", r.s("mode"))
		return nil, false
	}
	known := map[string]bool{"type": true, "action": true, "outbound": true, "invert": true, "method": true, "no_drop": true}
	for _, k := range append(append(append([]string{}, sbDestKeys...), sbPortKeys...), sbAndKeys...) {
		known[k] = true
	}
	bad := ""
	r.each(func(k string, _ *jnode) {
		if !known[k] && bad == "" {
			bad = k
		}
	})
	if bad != "" {
		c.report(r.lineOf(bad), item, "not converted: %s has no switchyard rule key", bad)
		return nil, false
	}
	var and []kv
	var setAlts [][]kv // the rule_set key's alternatives: named sets, inline sets' rules
	for _, k := range sbAndKeys {
		if !r.has(k) {
			continue
		}
		vs := r.strs(k)
		switch k {
		case "network":
			if len(vs) == 1 && (vs[0] == "tcp" || vs[0] == "udp") {
				and = append(and, kv{"network", vs[0]})
			} else if !(contains(vs, "tcp") && contains(vs, "udp")) {
				c.report(r.lineOf(k), item, "not converted: network %v", vs)
				return nil, false
			}
		case "rule_set":
			var tags []string
			for _, v := range vs {
				if rules, ok := c.sbInline[v]; ok {
					if depth > 4 {
						c.report(r.lineOf(k), item, "not converted: inline rule sets nested this deep")
						return nil, false
					}
					for _, h := range rules {
						alts, ok := c.sbConds(h, item, depth+1)
						if !ok {
							return nil, false
						}
						setAlts = append(setAlts, alts...)
					}
					continue
				}
				tg, why := c.setRef(v)
				if tg == "" {
					c.report(r.lineOf(k), item, "not converted: %s", why)
					return nil, false
				}
				tags = append(tags, tg)
			}
			if len(tags) > 0 {
				setAlts = append(setAlts, []kv{{"rule_set", tags}})
			}
		case "inbound":
			var tags []string
			for _, v := range vs {
				tg, ok := c.targets["inbound:"+v]
				if !ok {
					c.report(r.lineOf(k), item, "not converted: inbound %q was not converted", v)
					return nil, false
				}
				tags = append(tags, tg)
			}
			and = append(and, kv{"inbound", tags})
		case "protocol":
			for _, v := range vs {
				if !contains([]string{"tls", "http", "quic", "dns"}, v) {
					c.report(r.lineOf(k), item, "not converted: protocol %q is not sniffed by switchyard (tls, http, quic, dns are)", v)
					return nil, false
				}
			}
			and = append(and, kv{"protocol", vs})
		case "auth_user":
			and = append(and, kv{"user", vs})
		case "source_ip_cidr":
			ps, ok := c.sbPrefixes(r, k, item)
			if !ok {
				return nil, false
			}
			and = append(and, kv{k, ps})
		}
	}
	var dest []kv
	for _, k := range sbDestKeys {
		if !r.has(k) {
			continue
		}
		switch k {
		case "ip_is_private":
			if r.boolean(k) {
				dest = append(dest, kv{"ip_cidr", append([]string(nil), privateCIDRs...)})
			}
		case "ip_cidr":
			ps, ok := c.sbPrefixes(r, k, item)
			if !ok {
				return nil, false
			}
			dest = append(dest, kv{k, ps})
		case "domain_regex":
			vs := r.strs(k)
			for _, v := range vs {
				if why := validRegex(v); why != "" {
					c.report(r.lineOf(k), item, "not converted: %s", why)
					return nil, false
				}
			}
			dest = append(dest, kv{k, vs})
		default:
			dest = append(dest, kv{k, r.strs(k)})
		}
	}
	var port []kv
	if r.has("port") {
		var ps []int64
		for _, v := range r.strs("port") {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				c.report(r.lineOf("port"), item, "not converted: %q is not a port", v)
				return nil, false
			}
			ps = append(ps, int64(n))
		}
		port = append(port, kv{"port", ps})
	}
	if r.has("port_range") {
		var rs []string
		for _, v := range r.strs("port_range") {
			lo, hi, _ := strings.Cut(v, ":")
			if lo == "" {
				lo = "0"
			}
			if hi == "" {
				hi = "65535"
			}
			rs = append(rs, lo+":"+hi)
		}
		port = append(port, kv{"port_range", rs})
	}
	if len(dest) > 1 || len(port) > 1 {
		c.report(r.line, item, "split into one rule per destination and port key: sing-box matches any of them, switchyard's keys must all match")
	}
	if len(dest) == 0 {
		dest = []kv{{}}
	}
	if len(port) == 0 {
		port = []kv{{}}
	}
	if len(setAlts) > 0 && (dest[0].key != "" || port[0].key != "") {
		// sing-box matches a rule set's destination entries as one with the
		// rule's own: kept apart, both would have to match.
		for _, a := range setAlts {
			for _, e := range a {
				if e.key != "rule_set" {
					c.report(r.line, item, "not converted: an inline rule set beside destination or port keys")
					return nil, false
				}
			}
		}
	}
	var out [][]kv
	for _, d := range dest {
		for _, p := range port {
			var keys []kv
			if d.key != "" {
				keys = append(keys, d)
			}
			if p.key != "" {
				keys = append(keys, p)
			}
			out = append(out, append(keys, and...))
		}
	}
	if setAlts != nil {
		return c.cross(r, item, out, setAlts, "not converted: an inline rule set's key is also a key of the rule, and both would have to match")
	}
	return out, true
}

// cross is every alternative of out joined with every one of alts (an
// and of two ors); false, with why reported, when a pair shares a key, or
// when there would be more than maxRuleSplit.
func (c *conv) cross(r *jnode, item string, out, alts [][]kv, why string) ([][]kv, bool) {
	var next [][]kv
	for _, have := range out {
		for _, add := range alts {
			merged, ok := joinKeys(have, add)
			if !ok {
				c.report(r.line, item, "%s", why)
				return nil, false
			}
			next = append(next, merged)
		}
	}
	if len(next) > maxRuleSplit {
		return nil, c.tooMany(r, item)
	}
	return next, true
}

func (c *conv) tooMany(r *jnode, item string) bool {
	c.report(r.line, item, "not converted: it would be more than %d rules", maxRuleSplit)
	return false
}

// joinKeys is the keys of a and b together; false when both have a key.
func joinKeys(a, b []kv) ([]kv, bool) {
	out := append([]kv(nil), a...)
	for _, e := range b {
		for _, x := range a {
			if x.key == e.key {
				return nil, false
			}
		}
		out = append(out, e)
	}
	return out, true
}

// sbHijack converts a rule that hijacks DNS: the DNS service answers
// port-53 flows before any rule ([dns] serve = true).
func (c *conv) sbHijack(r *jnode) {
	c.hijack = true
	if c.dns != nil {
		c.dns.set("serve", true)
	}
	onlyDNS := true
	r.each(func(k string, v *jnode) {
		switch k {
		case "action", "outbound", "type":
		case "protocol":
			onlyDNS = onlyDNS && len(r.strs(k)) == 1 && r.strs(k)[0] == "dns"
		case "port":
			onlyDNS = onlyDNS && len(r.strs(k)) == 1 && r.strs(k)[0] == "53"
		default:
			onlyDNS = false
		}
	})
	if !onlyDNS {
		c.report(r.line, "route rule", "DNS hijacking: the DNS service answers port-53 flows (serve = true); this rule's own conditions are not converted")
	}
}

func (c *conv) sbPrefixes(r *jnode, k, item string) ([]string, bool) {
	var out []string
	for _, v := range r.strs(k) {
		p, err := prefix(v)
		if err != nil {
			c.report(r.lineOf(k), item, "not converted: %v", err)
			return nil, false
		}
		out = append(out, p)
	}
	return out, true
}

// sbSniff turns a sniff action on for the inbounds it names (all, without
// an inbound key).
func (c *conv) sbSniff(r *jnode) {
	names := r.strs("inbound")
	for _, t := range c.inbounds {
		tag, _ := t.get("tag")
		if len(names) == 0 {
			t.set("sniff", true)
			continue
		}
		for _, n := range names {
			if c.targets["inbound:"+n] == tag {
				t.set("sniff", true)
			}
		}
	}
	for k := range map[string]bool{"domain": true, "ip_cidr": true, "network": true, "protocol": true} {
		if r.has(k) {
			c.report(r.line, "route rule", "sniff action: switchyard sniffs every flow of the inbound; its conditions are not converted")
			break
		}
	}
}
