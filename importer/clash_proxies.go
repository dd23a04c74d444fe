package importer

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"switchyard/provider"
)

// clashIPVersion maps a proxy's ip-version to address_family.
var clashIPVersion = map[string]string{
	"dual": "auto", "ipv4": "ipv4_only", "ipv6": "ipv6_only",
	"ipv4-prefer": "prefer_ipv4", "ipv6-prefer": "prefer_ipv6",
}

// clashProxies converts the proxies list with provider.ClashProxy, the
// decoder a provider file's proxies go through.
func (c *conv) clashProxies(n *yaml.Node) {
	for _, p := range items(n) {
		if tag, ok := c.clashProxy(p, "proxy"); ok {
			c.proxyTags = append(c.proxyTags, tag)
		}
	}
}

// clashProxy converts one proxy mapping into an outbound.
func (c *conv) clashProxy(p *yaml.Node, kind string) (string, bool) {
	var m map[string]any
	if err := p.Decode(&m); err != nil || m == nil {
		c.report(p.Line, kind, "an entry that is not a mapping: not converted")
		return "", false
	}
	name := getStr(p, "name")
	item := kind + " " + strconv.Quote(name)
	if name == "" {
		c.report(p.Line, kind, "a proxy without a name: not converted")
		return "", false
	}
	if d := getStr(p, "dialer-proxy"); d != "" {
		c.drop(p.Line, item, name, "not converted: dialer-proxy chains it through "+strconv.Quote(d)+", and switchyard has no proxy chains")
		return "", false
	}
	node, err := provider.ClashProxy(m)
	if err != nil {
		c.drop(p.Line, item, name, "not converted: "+err.Error())
		return "", false
	}
	if v := getStr(p, "ip-version"); v != "" {
		if af, ok := clashIPVersion[v]; ok && af != "auto" {
			node.Outbound["address_family"] = af
		}
	}
	if s := get(p, "smux"); s != nil && getBool(s, "enabled") {
		c.report(s.Line, item, "smux is not converted: switchyard opens one proxy connection per flow")
	}
	for _, k := range []string{"interface-name", "routing-mark", "tfo", "mptcp"} {
		if v := get(p, k); v != nil && scalar(v) != "" && scalar(v) != "false" {
			c.report(v.Line, item, "%s is not converted: the [socket] policy applies to every outbound", k)
		}
	}
	return c.addOutbound(p.Line, kind, name, node.Outbound)
}

// clashInline converts an inline provider's payload into outbounds; the
// groups that use the provider get them as members.
func (c *conv) clashInline(p pair, item string) {
	var include, exclude *regexp.Regexp
	for _, k := range []string{"filter", "exclude-filter"} {
		if f := getStr(p.val, k); f != "" {
			re, err := regexp.Compile(f)
			if err != nil {
				c.report(p.line, item, "%s %q is not a Go regular expression (%v): left out", k, f, err)
				continue
			}
			if k == "filter" {
				include = re
			} else {
				exclude = re
			}
		}
	}
	var tags []string
	for _, e := range items(get(p.val, "payload")) {
		name := getStr(e, "name")
		if (include != nil && !include.MatchString(name)) || (exclude != nil && exclude.MatchString(name)) {
			continue
		}
		if tag, ok := c.clashProxy(e, "proxy"); ok {
			tags = append(tags, tag)
		}
	}
	c.inlineProv[p.key] = tags
	if len(tags) == 0 {
		c.report(p.line, item, "no proxy of its payload was converted")
	}
}

// clashProviders converts proxy-providers into [[providers]].
func (c *conv) clashProviders(n *yaml.Node) {
	for _, p := range pairs(n) {
		item := "proxy provider " + strconv.Quote(p.key)
		t := &table{header: "providers", array: true}
		tag := provider.Unique(p.key, c.provTagSet())
		t.set("tag", tag)
		switch typ := getStr(p.val, "type"); typ {
		case "file":
			path := getStr(p.val, "path")
			if path == "" {
				c.report(p.line, item, "a file provider without a path: not converted")
				continue
			}
			t.set("path", path)
		case "http":
			url := getStr(p.val, "url")
			if url == "" {
				c.report(p.line, item, "an http provider without a url: not converted")
				continue
			}
			t.set("url", url)
			if iv, err := strconv.ParseInt(getStr(p.val, "interval"), 10, 64); err == nil && iv > 0 {
				t.set("interval", duration(iv, "s"))
			}
			if path := getStr(p.val, "path"); path != "" {
				t.set("path", path)
			}
			p, t := p, t
			c.later = append(c.later, func() { c.clashVia(t, p, item) }) // groups may be named
		case "inline":
			c.clashInline(p, item)
			continue
		default:
			c.report(p.line, item, "not converted: type %q (file and http are converted)", typ)
			continue
		}
		for _, k := range []string{"filter", "exclude-filter"} {
			if f := getStr(p.val, k); f != "" {
				if _, err := regexp.Compile(f); err != nil {
					c.report(p.line, item, "%s %q is not a Go regular expression (%v): left out, so the provider keeps every node", k, f, err)
					continue
				}
				t.set(strings.ReplaceAll(k, "-", "_"), f)
			}
		}
		for _, k := range []string{"exclude-type", "override", "header"} {
			if v := get(p.val, k); v != nil {
				c.report(v.Line, item, "%s is not converted", k)
			}
		}
		if hc := get(p.val, "health-check"); hc != nil && getBool(hc, "enable") {
			c.report(hc.Line, item, "health-check is not converted: switchyard probes every node a group uses, as [health] says")
		}
		c.provTags[p.key] = tag
		c.providers = append(c.providers, t)
	}
}

// clashVia converts an http provider's proxy (what it is downloaded
// through) into download_via.
func (c *conv) clashVia(t *table, p pair, item string) {
	via := getStr(p.val, "proxy")
	if via == "" {
		return
	}
	if tg, why := c.clashTarget(via); tg != "" {
		if tg != "direct" {
			t.set("download_via", tg)
		}
	} else {
		c.report(lineOf(get(p.val, "proxy")), item, "proxy: %s; downloaded directly", why)
	}
}

func (c *conv) provTagSet() map[string]bool {
	m := map[string]bool{}
	for _, t := range c.provTags {
		m[t] = true
	}
	return m
}

// clashPolicies maps proxy-group types to group policies.
var clashPolicies = map[string]string{
	"select": "selector", "url-test": "urltest", "fallback": "fallback", "load-balance": "loadbalance",
}

// clashGroupKeys are the proxy-group keys converted, or cosmetic (they
// change nothing switchyard does).
var clashGroupKeys = []string{"name", "type", "proxies", "use", "url", "interval", "tolerance", "strategy",
	"include-all", "include-all-proxies", "include-all-providers", "lazy", "hidden", "icon"}

type clashGroup struct {
	node    *yaml.Node
	name    string
	tag     string
	policy  string
	members []string // input names, in order
	all     []string // tags of every proxy (include-all), after members
	use     []string // provider tags
}

// clashGroups converts proxy-groups. Every group's name is known before
// members are resolved (a group may name one written after it); a group
// left with no member, because what it named was not converted, is not
// converted either, and so on until every group left has a member.
func (c *conv) clashGroups(n *yaml.Node) {
	var gs []*clashGroup
	allProxies := c.proxyTags
	var allProviders []string
	for _, t := range c.providers {
		v, _ := t.get("tag")
		allProviders = append(allProviders, v.(string))
	}

	for _, g := range items(n) {
		name := getStr(g, "name")
		item := "proxy group " + strconv.Quote(name)
		if name == "" {
			c.report(g.Line, "proxy-groups", "a group without a name: not converted")
			continue
		}
		typ := getStr(g, "type")
		policy, ok := clashPolicies[typ]
		if !ok {
			why := "not converted: type " + strconv.Quote(typ) + " is not a group switchyard has (select, url-test, fallback, load-balance)"
			if typ == "relay" {
				why = "not converted: a relay chains its proxies, each dialed through the one before, and switchyard has no proxy chains"
			}
			c.drop(g.Line, item, name, why)
			continue
		}
		cg := &clashGroup{node: g, name: name, policy: policy}
		cg.members = strs(get(g, "proxies"))
		if getBool(g, "include-all") || getBool(g, "include-all-proxies") {
			cg.all = append(slices.Clone(allProxies), cg.all...)
		}
		for _, u := range items(get(g, "use")) {
			if tags, ok := c.inlineProv[scalar(u)]; ok {
				cg.all = append(cg.all, tags...)
			} else if tag, ok := c.provTags[scalar(u)]; ok {
				cg.use = append(cg.use, tag)
			} else {
				c.report(u.Line, item, "use: %q is no converted proxy provider", scalar(u))
			}
		}
		if getBool(g, "include-all") || getBool(g, "include-all-providers") {
			for _, p := range allProviders {
				if !slices.Contains(cg.use, p) {
					cg.use = append(cg.use, p)
				}
			}
		}
		cg.tag = c.tagFor(g.Line, "proxy group", name)
		c.targets[name] = cg.tag
		gs = append(gs, cg)
	}

	// Drop groups without a member that resolves, until none is left.
	alive := func(cg *clashGroup) bool {
		if len(cg.use) > 0 || len(cg.all) > 0 {
			return true
		}
		for _, m := range cg.members {
			if m == cg.name {
				continue
			}
			if tg, _ := c.target(m); tg != "" {
				return true
			}
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for i, cg := range gs {
			if cg != nil && !alive(cg) {
				delete(c.targets, cg.name)
				delete(c.taken, cg.tag)
				c.drop(cg.node.Line, "proxy group "+strconv.Quote(cg.name), cg.name, "not converted: none of its members was converted")
				gs[i] = nil
				changed = true
			}
		}
	}

	var interval int64
	intervals := map[int64]bool{}
	for _, cg := range gs {
		if cg == nil {
			continue
		}
		c.clashGroup(cg)
		if iv, err := strconv.ParseInt(getStr(cg.node, "interval"), 10, 64); err == nil && iv > 0 && cg.policy != "selector" {
			intervals[iv] = true
			if interval == 0 || iv < interval {
				interval = iv
			}
		}
	}
	if interval > 0 {
		section(&c.health, "health").set("check_interval", duration(interval, "s"))
		if len(intervals) > 1 {
			c.report(lineOf(n), "proxy-groups", "interval: switchyard probes every node on one interval, %s (the shortest the groups give)", duration(interval, "s"))
		}
	}
}

func (c *conv) clashGroup(cg *clashGroup) {
	g := cg.node
	item := "proxy group " + strconv.Quote(cg.name)
	t := &table{header: "groups", array: true}
	t.set("tag", cg.tag)
	t.set("policy", cg.policy)
	var members []string
	for _, m := range cg.members {
		if m == cg.name {
			c.report(g.Line, item, "a group cannot be its own member: left out")
			continue
		}
		tg, why := c.target(m)
		if tg == "" {
			c.report(g.Line, item, "member left out: %s", why)
			continue
		}
		if slices.Contains(members, tg) {
			continue
		}
		members = append(members, tg)
	}
	for _, tg := range cg.all {
		if !slices.Contains(members, tg) {
			members = append(members, tg)
		}
	}
	if len(members) > 0 {
		t.set("members", members)
	}
	if len(cg.use) > 0 {
		t.set("use", cg.use)
	}
	if cg.policy != "selector" {
		if u := getStr(g, "url"); u != "" && u != "https://www.gstatic.com/generate_204" {
			t.set("check_url", u)
		}
	}
	if cg.policy == "urltest" {
		if tol, err := strconv.ParseInt(getStr(g, "tolerance"), 10, 64); err == nil && tol > 0 {
			t.set("tolerance", duration(tol, "ms"))
		}
	}
	if cg.policy == "loadbalance" {
		if s := getStr(g, "strategy"); s != "round-robin" {
			if s == "" {
				s = "consistent-hashing (the default)"
			}
			c.report(g.Line, item, "strategy %s: switchyard's loadbalance is round robin (a UDP association keeps its node)", s)
		}
	}
	for _, p := range pairs(g) {
		if !slices.Contains(clashGroupKeys, p.key) {
			c.report(p.line, item, "%s is not converted", p.key)
		}
	}
	c.groups = append(c.groups, t)
}
