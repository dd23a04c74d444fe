package importer

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// sbDNSServer is one converted sing-box DNS server.
type sbDNSServer struct {
	url    string // "" when not converted
	fakeip bool
	block  bool // rcode://
	detour string
	v4, v6 string // fakeip ranges
	line   int
}

// sbServerURL converts one server, legacy ("address") or typed.
func sbServerURL(s *jnode) (sbDNSServer, error) {
	out := sbDNSServer{line: s.line, detour: s.s("detour")}
	if addr := s.s("address"); addr != "" && !s.has("type") {
		switch {
		case addr == "local":
			out.url = "system"
		case addr == "fakeip":
			out.fakeip = true
		case strings.HasPrefix(addr, "rcode://"):
			out.block = true
		default:
			u, _, err := dnsURL(addr)
			if err != nil {
				return out, err
			}
			out.url = u
		}
		return out, nil
	}
	typ := s.s("type")
	switch typ {
	case "local", "dhcp":
		out.url = "system"
		return out, nil
	case "fakeip":
		out.fakeip = true
		out.v4, out.v6 = s.s("inet4_range"), s.s("inet6_range")
		return out, nil
	case "udp", "tcp", "tls", "https":
	default:
		return out, errors.New("type " + strconv.Quote(typ) + " is not a DNS transport switchyard has (udp, tcp, tls, https, local)")
	}
	host := strings.Trim(s.s("server"), "[]")
	if host == "" {
		return out, errors.New("no server")
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		host = "[" + host + "]"
	}
	if p, ok := s.int("server_port"); ok && p > 0 {
		host = net.JoinHostPort(strings.Trim(host, "[]"), strconv.FormatInt(p, 10))
	}
	u := typ + "://" + host
	if typ == "https" {
		u += s.s("path")
	}
	if why := checkDNS(u); why != "" {
		return out, errors.New(why)
	}
	out.url = u
	return out, nil
}

// sbDNS converts the dns section: the final server (asked through the
// route table when it has a detour), the rules, fake IPs.
func (c *conv) sbDNS(n, route *jnode) {
	if n == nil {
		return
	}
	servers := map[string]sbDNSServer{}
	var order []string
	for _, s := range n.list("servers") {
		tag := s.s("tag")
		srv, err := sbServerURL(s)
		if err != nil {
			c.report(s.line, "dns server "+strconv.Quote(tag), "not converted: %v", err)
		}
		servers[tag] = srv
		order = append(order, tag)
	}
	final := n.s("final")
	if final == "" && len(order) > 0 {
		final = order[0]
	}
	fs, ok := servers[final]
	var fakeV4, fakeV6 string
	if fk := n.get("fakeip"); fk != nil && fk.boolean("enabled") {
		fakeV4, fakeV6 = fk.s("inet4_range"), fk.s("inet6_range")
	}
	useFake := func(s sbDNSServer) {
		if s.v4 != "" || s.v6 != "" {
			fakeV4, fakeV6 = s.v4, s.v6
		}
		if fakeV4 == "" && fakeV6 == "" {
			fakeV4 = "198.18.0.0/15"
		}
		section(&c.fakeip, "dns.fakeip")
	}
	if ok && fs.fakeip {
		useFake(fs)
		fs, ok = sbDNSServer{}, false
		for _, t := range order {
			if s := servers[t]; s.url != "" {
				fs, ok = s, true
				break
			}
		}
	}
	if !ok || fs.url == "" {
		if len(order) > 0 {
			c.report(n.line, "dns", "not converted: the final server was not converted (the system resolver answers)")
		}
		c.fakeip = nil
		return
	}
	t := section(&c.dns, "dns")
	// The servers that resolve proxy servers: a rule "outbound": "any",
	// else the first server without a detour.
	var pre string
	resolver := route.s("default_domain_resolver")
	if r := route.get("default_domain_resolver"); r != nil && r.kind == 'o' {
		resolver = r.s("server")
	}
	if s := servers[resolver]; resolver != "" && s.url != "" {
		pre = s.url
	}
	for _, r := range n.list("rules") {
		if contains(r.strs("outbound"), "any") {
			if s := servers[r.s("server")]; s.url != "" {
				pre = s.url
			}
		}
	}
	if fs.detour != "" && !c.directTags[fs.detour] {
		if pre == "" {
			for _, tg := range order {
				if s := servers[tg]; s.url != "" && (s.detour == "" || c.directTags[s.detour]) {
					pre = s.url
					break
				}
			}
		}
		if pre == "" {
			pre = "system"
		}
		t.set("pre_proxy", []string{pre})
		t.set("through_proxy", []string{fs.url})
	} else {
		t.set("servers", []string{fs.url})
	}
	t.set("serve", true)
	for _, r := range n.list("rules") {
		c.sbDNSRule(r, servers, useFake)
	}
	if c.fakeip != nil {
		for _, v := range []struct{ key, r string }{{"ipv4", fakeV4}, {"ipv6", fakeV6}} {
			if v.r == "" {
				continue
			}
			p, err := netip.ParsePrefix(v.r)
			if err != nil {
				c.report(n.line, "dns fakeip", "%q is not a prefix: not converted", v.r)
				continue
			}
			c.fakeip.set(v.key, p.Masked().String())
		}
		if len(c.fakeip.kvs) == 0 {
			c.fakeip = nil
		}
	}
	n.each(func(k string, v *jnode) {
		switch k {
		case "servers", "rules", "final", "fakeip", "independent_cache", "reverse_mapping", "cache_capacity":
		default:
			c.report(v.line, "dns."+k, "not converted: switchyard has no equivalent")
		}
	})
}

var sbDNSDomainKeys = []string{"domain", "domain_suffix", "domain_keyword", "domain_regex", "rule_set"}

func (c *conv) sbDNSRule(r *jnode, servers map[string]sbDNSServer, useFake func(sbDNSServer)) {
	item := "dns rule"
	if contains(r.strs("outbound"), "any") {
		return // the servers of proxy servers: pre_proxy
	}
	if r.s("type") == "logical" || r.boolean("invert") {
		c.report(r.line, item, "not converted: logical and inverted rules have no switchyard equivalent")
		return
	}
	srv := servers[r.s("server")]
	action := r.s("action")
	switch {
	case action == "reject" || srv.block:
	case action != "" && action != "route":
		c.report(r.line, item, "not converted: action %q", action)
		return
	case srv.fakeip:
		useFake(srv)
		if r.has("domain") || r.has("domain_suffix") || r.has("rule_set") || r.has("domain_keyword") {
			c.report(r.line, item, "fake IPs: switchyard gives them to every name but [dns.fakeip].fake_ip_filter, not only to this rule's")
		}
		return
	case srv.url == "":
		c.report(r.line, item, "not converted: its server %q was not converted", r.s("server"))
		return
	}
	bad := ""
	r.each(func(k string, _ *jnode) {
		if !contains(sbDNSDomainKeys, k) && !contains([]string{"server", "action", "type", "disable_cache", "rewrite_ttl", "client_subnet", "method", "no_drop"}, k) && bad == "" {
			bad = k
		}
	})
	if bad != "" {
		c.report(r.lineOf(bad), item, "not converted: %s has no switchyard DNS rule key", bad)
		return
	}
	emitted := false
	for _, k := range sbDNSDomainKeys {
		if !r.has(k) {
			continue
		}
		vs := r.strs(k)
		if k == "rule_set" {
			var tags []string
			for _, v := range vs {
				tg, why := c.setRef(v)
				if tg == "" {
					c.report(r.lineOf(k), item, "not converted: %s", why)
					return
				}
				tags = append(tags, tg)
			}
			vs = tags
		}
		if k == "domain_regex" {
			for _, v := range vs {
				if why := validRegex(v); why != "" {
					c.report(r.lineOf(k), item, "not converted: %s", why)
					return
				}
			}
		}
		if k == "domain_suffix" {
			for i := range vs {
				vs[i] = strings.TrimPrefix(vs[i], ".")
			}
		}
		t := &table{header: "dns.rules", array: true}
		t.set(k, vs)
		if action == "reject" || srv.block {
			t.set("action", "block")
		} else {
			t.set("servers", []string{srv.url})
		}
		c.dnsRules = append(c.dnsRules, t)
		emitted = true
	}
	if !emitted {
		c.report(r.line, item, "not converted: a DNS rule needs a domain key or rule_set")
	}
}
