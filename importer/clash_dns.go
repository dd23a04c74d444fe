package importer

import (
	"net/netip"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// clashDNSKeys are the dns keys converted here.
var clashDNSKeys = []string{"enable", "nameserver", "default-nameserver", "enhanced-mode", "fake-ip-range",
	"fake-ip-range6", "fake-ip-filter", "nameserver-policy", "proxy-server-nameserver", "respect-rules", "ipv6", "fake-ip-filter-mode"}

// clashServers converts a nameserver list, reporting what is left out.
func (c *conv) clashServers(n *yaml.Node, item string) []string {
	var out []string
	for _, e := range items(n) {
		u, note, err := dnsURL(scalar(e))
		if err != nil {
			c.report(e.Line, item, "%q not converted: %v", scalar(e), err)
			continue
		}
		if note != "" {
			c.report(e.Line, item, "%q: %s", scalar(e), note)
		}
		if !contains(out, u) {
			out = append(out, u)
		}
	}
	return out
}

func contains(vs []string, v string) bool {
	for _, x := range vs {
		if x == v {
			return true
		}
	}
	return false
}

// clashDNS converts the dns section.
func (c *conv) clashDNS(n *yaml.Node) {
	if !getBool(n, "enable") {
		return
	}
	servers := c.clashServers(get(n, "nameserver"), "dns.nameserver")
	if len(servers) == 0 {
		c.report(lineOf(n), "dns", "no nameserver converted: the DNS section is not converted (the system resolver answers)")
		return
	}
	t := section(&c.dns, "dns")
	pre := c.clashServers(get(n, "proxy-server-nameserver"), "dns.proxy-server-nameserver")
	switch {
	case len(pre) > 0 && getBool(n, "respect-rules"):
		t.set("pre_proxy", pre)
		t.set("through_proxy", servers)
	default:
		t.set("servers", servers)
		if len(pre) > 0 {
			c.report(lineOf(get(n, "proxy-server-nameserver")), "dns.proxy-server-nameserver",
				"not converted: without respect-rules the nameservers resolve proxy servers too")
		}
		if getBool(n, "respect-rules") {
			c.report(lineOf(get(n, "respect-rules")), "dns.respect-rules", "not converted: it goes with proxy-server-nameserver")
		}
	}
	t.set("serve", true)
	byName := false
	for _, s := range append(append([]string(nil), servers...), pre...) {
		if s != "system" && !isIPServer(s) {
			byName = true
		}
	}
	if byName {
		for _, e := range items(get(n, "default-nameserver")) {
			u, _, err := dnsURL(scalar(e))
			if err == nil && (strings.HasPrefix(u, "udp://") || strings.HasPrefix(u, "tcp://")) && isIPServer(u) {
				t.set("bootstrap", u)
				break
			}
		}
	}
	for _, p := range pairs(n) {
		switch p.key {
		case "listen":
			c.report(p.line, "dns.listen", "not converted: switchyard has no DNS listener; the DNS service answers port-53 flows through its inbounds (serve = true)")
		case "fallback", "fallback-filter":
			c.report(p.line, "dns."+p.key, "not converted: switchyard has no answer-based fallback; the nameservers answer everything")
		default:
			if !contains(clashDNSKeys, p.key) {
				c.report(p.line, "dns."+p.key, "not converted: switchyard has no equivalent")
			}
		}
	}
	c.clashPolicy(get(n, "nameserver-policy"))
	if strings.EqualFold(getStr(n, "enhanced-mode"), "fake-ip") {
		c.clashFakeIP(n)
	}
}

// clashPolicy converts nameserver-policy into [[dns.rules]], one rule per
// kind of pattern of an entry.
func (c *conv) clashPolicy(n *yaml.Node) {
	for _, p := range pairs(n) {
		item := "dns.nameserver-policy " + strconv.Quote(p.key)
		servers := c.clashServers(p.val, item)
		if len(servers) == 0 {
			c.report(p.line, item, "not converted: none of its servers was converted")
			continue
		}
		keys := map[string][]string{}
		var order []string
		for _, pat := range strings.Split(p.key, ",") {
			pat = strings.TrimSpace(pat)
			var k, v string
			switch lower := strings.ToLower(pat); {
			case strings.HasPrefix(lower, "geosite:"):
				c.report(p.line, item, "%s not converted: geosite databases are not read (give the domains as a rule provider, rule-set:NAME)", pat)
				continue
			case strings.HasPrefix(lower, "rule-set:"):
				tag, why := c.setRef(pat[len("rule-set:"):])
				if tag == "" {
					c.report(p.line, item, "%s not converted: %s", pat, why)
					continue
				}
				k, v = "rule_set", tag
			default:
				k, v = dnsRuleFromPattern(pat)
				if v == "" {
					continue
				}
			}
			if _, ok := keys[k]; !ok {
				order = append(order, k)
			}
			keys[k] = append(keys[k], v)
		}
		for _, k := range order {
			r := &table{header: "dns.rules", array: true}
			r.set(k, keys[k])
			r.set("servers", servers)
			c.dnsRules = append(c.dnsRules, r)
		}
	}
}

// clashFakeIP converts enhanced-mode: fake-ip into [dns.fakeip].
func (c *conv) clashFakeIP(n *yaml.Node) {
	t := section(&c.fakeip, "dns.fakeip")
	for _, k := range []struct{ key, to, def string }{{"fake-ip-range", "ipv4", "198.18.0.1/16"}, {"fake-ip-range6", "ipv6", ""}} {
		r := getStr(n, k.key)
		if r == "" {
			r = k.def
		}
		if r == "" {
			continue
		}
		p, err := netip.ParsePrefix(r)
		if err != nil {
			c.report(lineOf(get(n, k.key)), "dns."+k.key, "%q is not a prefix: not converted", r)
			continue
		}
		t.set(k.to, p.Masked().String())
	}
	if len(t.kvs) == 0 {
		c.fakeip = nil
		return
	}
	var filter []string
	for _, e := range items(get(n, "fake-ip-filter")) {
		s := strings.ToLower(strings.TrimSpace(scalar(e)))
		switch {
		case strings.Contains(s, ":"):
			c.report(e.Line, "dns.fake-ip-filter", "%q not converted: only domain patterns are", s)
			continue
		case strings.HasPrefix(s, "*.") || strings.HasPrefix(s, "+.") || strings.HasPrefix(s, "."):
			s = strings.TrimLeft(s, "*+.")
		}
		if s == "" || strings.Contains(s, "*") {
			c.report(e.Line, "dns.fake-ip-filter", "%q not converted: the filter is a list of domain suffixes", scalar(e))
			continue
		}
		if !contains(filter, s) {
			filter = append(filter, s)
		}
	}
	if len(filter) > 0 {
		t.set("fake_ip_filter", filter)
	}
	if m := getStr(n, "fake-ip-filter-mode"); m != "" && m != "blacklist" {
		c.report(lineOf(get(n, "fake-ip-filter-mode")), "dns.fake-ip-filter-mode", "%s is not converted: the filter lists the names that get real answers", m)
	}
}
