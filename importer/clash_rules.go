package importer

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// clashBehaviors maps a rule provider's behavior to a rule-set format.
var clashBehaviors = map[string]string{"domain": "clash-domain", "ipcidr": "clash-ipcidr", "classical": "clash-classical"}

// clashRuleProviders converts rule-providers into [[rule_sets]].
func (c *conv) clashRuleProviders(n *yaml.Node) {
	for _, p := range pairs(n) {
		item := "rule provider " + strconv.Quote(p.key)
		behavior := getStr(p.val, "behavior")
		format, ok := clashBehaviors[behavior]
		if !ok {
			c.dropSet(p.line, item, p.key, "not converted: behavior "+strconv.Quote(behavior)+" (domain, ipcidr and classical are converted)")
			continue
		}
		switch f := getStr(p.val, "format"); f {
		case "", "yaml", "text":
		case "mrs":
			c.dropSet(p.line, item, p.key, "not converted: the mrs binary format is not read; use the provider's yaml or text form")
			continue
		default:
			c.dropSet(p.line, item, p.key, "not converted: format "+strconv.Quote(f))
			continue
		}
		t := &table{header: "rule_sets", array: true}
		tag := p.key
		t.set("tag", tag)
		switch typ := getStr(p.val, "type"); typ {
		case "file":
			path := getStr(p.val, "path")
			if path == "" {
				c.dropSet(p.line, item, p.key, "not converted: a file provider without a path")
				continue
			}
			t.set("path", path)
		case "http":
			url := getStr(p.val, "url")
			if url == "" {
				c.dropSet(p.line, item, p.key, "not converted: an http provider without a url")
				continue
			}
			t.set("url", url)
			if iv, err := strconv.ParseInt(getStr(p.val, "interval"), 10, 64); err == nil && iv > 0 {
				t.set("interval", duration(iv, "s"))
			}
			if path := getStr(p.val, "path"); path != "" {
				t.set("path", path)
			}
			c.clashVia(t, p, item)
		case "inline":
			c.clashInlineSet(p, item, behavior)
			continue
		default:
			c.dropSet(p.line, item, p.key, "not converted: type "+strconv.Quote(typ)+" (file and http are converted)")
			continue
		}
		t.set("format", format)
		c.setTags[p.key] = tag
		c.ruleSets = append(c.ruleSets, t)
	}
}

// clashInlineSet reads an inline rule provider's payload into conditions,
// which each RULE-SET naming it becomes (one rule a condition; adjacent
// ones of one key merge).
func (c *conv) clashInlineSet(p pair, item, behavior string) {
	var conds [][]kv
	for _, e := range items(get(p.val, "payload")) {
		entry := strings.TrimSpace(scalar(e))
		if entry == "" {
			continue
		}
		switch behavior {
		case "domain":
			k, v := dnsRuleFromPattern(entry)
			if v == "" || v == "*" {
				c.report(e.Line, item, "%q is not converted", entry)
				continue
			}
			conds = append(conds, []kv{{k, []string{v}}})
		case "ipcidr":
			pf, err := prefix(entry)
			if err != nil {
				c.report(e.Line, item, "%v: not converted", err)
				continue
			}
			conds = append(conds, []kv{{"ip_cidr", []string{pf}}})
		case "classical":
			parts := strings.Split(entry, ",")
			if len(parts) < 2 {
				c.report(e.Line, item, "%q is not TYPE,VALUE: not converted", entry)
				continue
			}
			keys, why := c.clashRuleKeys(strings.ToUpper(strings.TrimSpace(parts[0])), strings.TrimSpace(parts[1]))
			if why != "" {
				c.report(e.Line, item, "%q not converted: %s", entry, why)
				continue
			}
			conds = append(conds, keys)
		}
	}
	c.inlineSets[p.key] = conds
}

func (c *conv) dropSet(line int, item, name, why string) {
	c.report(line, item, "%s", why)
	c.setTags[name] = ""
}

// setRef resolves a rule provider's name to its rule-set tag.
func (c *conv) setRef(name string) (string, string) {
	tag, ok := c.setTags[name]
	if _, inline := c.sbInline[name]; inline {
		return "", "inline rule set " + strconv.Quote(name) + " is converted into route rules only"
	}
	switch {
	case !ok:
		return "", "no rule set (rule provider) " + strconv.Quote(name) + " is declared"
	case tag == "":
		return "", "rule set " + strconv.Quote(name) + " was not converted (see above)"
	}
	return tag, ""
}

// clashTarget resolves a rule's target.
func (c *conv) clashTarget(name string) (string, string) {
	switch strings.ToUpper(name) {
	case "DIRECT":
		return "direct", ""
	case "REJECT", "REJECT-DROP":
		return "block", ""
	case "PASS":
		return "", "PASS (go on with the next rule) has no switchyard equivalent"
	case "GLOBAL":
		return "", "GLOBAL is the controller's selector and no rule target in switchyard"
	}
	return c.target(name)
}

// clashRules converts the rules list; MATCH becomes [route].final.
func (c *conv) clashRules(n *yaml.Node) {
	matched := false
	for _, r := range items(n) {
		text := strings.TrimSpace(scalar(r))
		parts := strings.Split(text, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		typ := strings.ToUpper(parts[0])
		item := clip(text)
		if matched {
			c.report(r.Line, item, "after MATCH: never reached; not converted")
			continue
		}
		switch typ {
		case "AND", "OR":
			c.clashLogical(r.Line, item, typ, strings.TrimSpace(text[len(parts[0]):]))
			continue
		case "NOT", "SUB-RULE":
			c.report(r.Line, item, "not converted: %s rules have no switchyard equivalent", typ)
			continue
		case "MATCH", "FINAL":
			if len(parts) < 2 {
				c.report(r.Line, item, "MATCH without a target: not converted")
				continue
			}
			if tg, why := c.clashTarget(parts[1]); tg != "" {
				section(&c.route, "route").set("final", tg)
			} else {
				c.report(r.Line, item, "not converted: %s", why)
			}
			matched = true
			continue
		}
		if len(parts) < 3 {
			c.report(r.Line, item, "not converted: a rule is TYPE,VALUE,TARGET")
			continue
		}
		value, target, opts := parts[1], parts[2], parts[3:]
		tg, why := c.clashTarget(target)
		if tg == "" {
			c.report(r.Line, item, "not converted: %s", why)
			continue
		}
		if conds, ok := c.inlineSets[value]; ok && typ == "RULE-SET" {
			// An inline provider's entries, as rules of their own.
			for _, cond := range conds {
				c.addRule(cond, tg)
			}
			continue
		}
		keys, why := c.clashRuleKeys(typ, value)
		if why != "" {
			c.report(r.Line, item, "not converted: %s", why)
			continue
		}
		noResolve := false
		for _, o := range opts {
			switch strings.ToLower(o) {
			case "no-resolve":
				noResolve = true
			case "src":
				c.report(r.Line, item, "not converted: the src option (match the source) has no switchyard equivalent for %s", typ)
				keys = nil
			default:
				c.report(r.Line, item, "option %q is not converted", o)
			}
		}
		if keys == nil {
			continue
		}
		switch typ {
		case "IP-CIDR", "IP-CIDR6", "GEOIP":
			if !noResolve && strings.ToUpper(value) != "LAN" {
				c.report(r.Line, item, "matches flows to an IP address only, as with no-resolve: switchyard does not resolve a name for an IP rule")
			}
		case "RULE-SET":
			if !noResolve {
				if t, _ := c.ruleSetFormat(keys[0].val.([]string)[0]); t != "clash-domain" {
					c.report(r.Line, item, "its IP entries match flows to an IP address only, as with no-resolve")
				}
			}
		}
		if typ == "GEOIP" && strings.ToUpper(value) != "LAN" && !c.geoIP {
			c.geoIP = true
			c.report(r.Line, item, `[route].geoip_path = "Country.mmdb": that MaxMind country database must exist beside the output file (where mihomo keeps it) for the output to load`)
		}
		c.addRule(keys, tg)
	}
}

func (c *conv) ruleSetFormat(tag string) (string, bool) {
	for _, t := range c.ruleSets {
		if v, _ := t.get("tag"); v == tag {
			f, _ := t.get("format")
			s, ok := f.(string)
			return s, ok
		}
	}
	return "", false
}

// clashLogical converts AND,((C1),(C2)...),TARGET into one rule whose
// keys are the conditions' (switchyard's keys all must match), and OR into
// one rule per condition, in order, to the same target.
func (c *conv) clashLogical(line int, item, typ, rest string) {
	rest = strings.TrimSpace(strings.TrimPrefix(rest, ","))
	end := closing(rest)
	if !strings.HasPrefix(rest, "(") || end < 0 {
		c.report(line, item, "not converted: a %s rule is %s,((TYPE,VALUE),...),TARGET", typ, typ)
		return
	}
	inner, after := rest[1:end], strings.TrimSpace(rest[end+1:])
	tparts := strings.Split(strings.TrimPrefix(after, ","), ",")
	tg, why := c.clashTarget(strings.TrimSpace(tparts[0]))
	if tg == "" {
		c.report(line, item, "not converted: %s", why)
		return
	}
	var conds [][]kv
	for len(strings.TrimSpace(inner)) > 0 {
		inner = strings.TrimLeft(inner, " ,")
		e := closing(inner)
		if !strings.HasPrefix(inner, "(") || e < 0 {
			c.report(line, item, "not converted: its conditions are not (TYPE,VALUE) groups")
			return
		}
		cond := strings.TrimSpace(inner[1:e])
		inner = inner[e+1:]
		ct, cv, _ := strings.Cut(cond, ",")
		ct = strings.ToUpper(strings.TrimSpace(ct))
		cv, _, _ = strings.Cut(cv, ",") // a condition's own options (no-resolve)
		if ct == "AND" || ct == "OR" || ct == "NOT" {
			c.report(line, item, "not converted: a nested %s has no switchyard equivalent", ct)
			return
		}
		keys, why := c.clashRuleKeys(ct, strings.TrimSpace(cv))
		if why != "" {
			c.report(line, item, "not converted: %s", why)
			return
		}
		conds = append(conds, keys)
	}
	if len(conds) == 0 {
		c.report(line, item, "not converted: no condition")
		return
	}
	if typ == "OR" {
		for _, k := range conds {
			c.addRule(k, tg)
		}
		return
	}
	var all []kv
	for _, k := range conds {
		for _, e := range k {
			for _, a := range all {
				if a.key == e.key {
					c.report(line, item, "not converted: two conditions of one kind (%s) must both match, and a switchyard key matches any of its values", e.key)
					return
				}
			}
			all = append(all, e)
		}
	}
	t := &table{header: "rules", array: true}
	for _, e := range all {
		t.set(e.key, e.val)
	}
	t.set("outbound", tg)
	c.rules = append(c.rules, t)
}

// closing is the index of the parenthesis that closes s[0] ('('), or -1.
func closing(s string) int {
	if s == "" || s[0] != '(' {
		return -1
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

// clashRuleKeys converts one rule's condition into [[rules]] keys.
func (c *conv) clashRuleKeys(typ, value string) ([]kv, string) {
	one := func(k string, v any) ([]kv, string) { return []kv{{k, v}}, "" }
	switch typ {
	case "DOMAIN":
		return one("domain", []string{strings.ToLower(value)})
	case "DOMAIN-SUFFIX":
		return one("domain_suffix", []string{strings.TrimPrefix(strings.ToLower(value), ".")})
	case "DOMAIN-KEYWORD":
		return one("domain_keyword", []string{strings.ToLower(value)})
	case "DOMAIN-REGEX":
		if why := validRegex(value); why != "" {
			return nil, why
		}
		return one("domain_regex", []string{value})
	case "DOMAIN-WILDCARD":
		return one("domain_regex", []string{wildcardRegex(value)})
	case "IP-CIDR", "IP-CIDR6":
		p, err := prefix(value)
		if err != nil {
			return nil, err.Error()
		}
		return one("ip_cidr", []string{p})
	case "SRC-IP-CIDR":
		p, err := prefix(value)
		if err != nil {
			return nil, err.Error()
		}
		return one("source_ip_cidr", []string{p})
	case "DST-PORT":
		single, ranges, err := ports(value)
		if err != nil {
			return nil, err.Error()
		}
		switch {
		case len(ranges) == 0:
			return one("port", single)
		case len(single) == 0:
			return one("port_range", ranges)
		}
		for _, p := range single {
			ranges = append(ranges, strconv.FormatInt(p, 10)+":"+strconv.FormatInt(p, 10))
		}
		return one("port_range", ranges)
	case "NETWORK":
		switch v := strings.ToLower(value); v {
		case "tcp", "udp":
			return one("network", v)
		}
		return nil, strconv.Quote(value) + " is not a network (tcp, udp)"
	case "GEOIP":
		if strings.EqualFold(value, "lan") {
			return one("ip_cidr", append([]string(nil), privateCIDRs...))
		}
		if len(value) != 2 {
			return nil, strconv.Quote(value) + " is no country code: switchyard reads countries from a MaxMind database"
		}
		return one("geoip", []string{strings.ToLower(value)})
	case "RULE-SET":
		tag, why := c.setRef(value)
		if tag == "" {
			return nil, why
		}
		return one("rule_set", []string{tag})
	case "IN-USER":
		return one("user", []string{value})
	case "IN-NAME":
		if tag, ok := c.targets["inbound:"+value]; ok {
			return one("inbound", []string{tag})
		}
		return nil, strconv.Quote(value) + " is no converted listener"
	case "GEOSITE":
		return nil, "geosite databases are not read: give the same domains as a rule provider (RULE-SET)"
	case "PROCESS-NAME", "PROCESS-PATH", "PROCESS-NAME-REGEX", "PROCESS-PATH-REGEX", "UID":
		return nil, "switchyard does not see the local process of a flow"
	case "SRC-PORT":
		return nil, "switchyard rules have no source port"
	}
	return nil, "rule type " + typ + " has no switchyard equivalent"
}

// clip shortens s for a problem's item.
func clip(s string) string {
	if r := []rune(s); len(r) > 80 {
		return string(r[:77]) + "..."
	}
	return s
}
