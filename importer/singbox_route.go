package importer

import (
	"strconv"
	"strings"
)

// sbGroups converts selector and urltest outbounds, dropping (until none
// is left) those with no member converted.
func (c *conv) sbGroups(gs []*jnode) {
	type pending struct {
		n       *jnode
		name    string
		tag     string
		members []string
	}
	var ps []*pending
	for _, g := range gs {
		name := g.s("tag")
		if name == "" {
			c.report(g.line, "outbounds", "a group without a tag: not converted")
			continue
		}
		p := &pending{n: g, name: name, members: g.strs("outbounds")}
		p.tag = c.tagFor(g.line, "outbound", name)
		c.targets[name] = p.tag
		ps = append(ps, p)
	}
	alive := func(p *pending) bool {
		for _, m := range p.members {
			if tg, _ := c.target(m); tg != "" && m != p.name {
				return true
			}
		}
		return false
	}
	for changed := true; changed; {
		changed = false
		for i, p := range ps {
			if p != nil && !alive(p) {
				delete(c.targets, p.name)
				delete(c.taken, p.tag)
				c.drop(p.n.line, "outbound "+strconv.Quote(p.name), p.name, "not converted: none of its members was converted")
				ps[i] = nil
				changed = true
			}
		}
	}
	var interval string
	for _, p := range ps {
		if p == nil {
			continue
		}
		g := p.n
		item := "outbound " + strconv.Quote(p.name)
		t := &table{header: "groups", array: true}
		t.set("tag", p.tag)
		var members []string
		for _, m := range p.members {
			tg, why := c.target(m)
			if tg == "" || m == p.name {
				if m == p.name {
					why = "a group cannot be its own member"
				}
				c.report(g.line, item, "member left out: %s", why)
				continue
			}
			if !contains(members, tg) {
				members = append(members, tg)
			}
		}
		switch g.s("type") {
		case "selector":
			t.set("policy", "selector")
			t.set("members", members)
			if d := g.s("default"); d != "" {
				if tg, _ := c.target(d); tg != "" && contains(members, tg) {
					t.set("default", tg)
				}
			}
			t.set("interrupt", g.boolean("interrupt_exist_connections"))
		case "urltest":
			t.set("policy", "urltest")
			t.set("members", members)
			if u := g.s("url"); u != "" && u != "https://www.gstatic.com/generate_204" {
				t.set("check_url", u)
			}
			if tol, ok := g.int("tolerance"); ok && tol > 0 {
				t.set("tolerance", duration(tol, "ms"))
			}
			if it := g.s("idle_timeout"); it != "" {
				if d, err := parseDuration(it); err == nil && d > 0 {
					t.set("idle_timeout", d.String())
				}
			}
			if g.boolean("interrupt_exist_connections") {
				t.set("interrupt", true)
			}
			if iv := g.s("interval"); iv != "" && (interval == "" || shorter(iv, interval)) {
				interval = iv
			}
		}
		g.each(func(k string, v *jnode) {
			switch k {
			case "tag", "type", "outbounds", "default", "interrupt_exist_connections", "url", "tolerance", "idle_timeout", "interval":
			default:
				c.report(v.line, item, "%s is not converted", k)
			}
		})
		c.groups = append(c.groups, t)
	}
	if d, err := parseDuration(interval); err == nil && d > 0 {
		section(&c.health, "health").set("check_interval", d.String())
	}
}

// shorter compares two Go durations; false when either does not parse.
func shorter(a, b string) bool {
	da, err1 := parseDuration(a)
	db, err2 := parseDuration(b)
	return err1 == nil && err2 == nil && da < db
}

// sbRuleSets converts route.rule_set into [[rule_sets]].
func (c *conv) sbRuleSets(n *jnode) {
	for _, rs := range n.elems() {
		tag := rs.s("tag")
		item := "rule_set " + strconv.Quote(tag)
		if tag == "" {
			c.report(rs.line, "route.rule_set", "a rule set without a tag: not converted")
			continue
		}
		if rs.s("type") == "inline" {
			// Its rules become the conditions of the route rules naming it.
			c.sbInline[tag] = rs.list("rules")
			c.setTags[tag] = ""
			continue
		}
		var format string
		switch f := rs.s("format"); f {
		case "binary":
			format = "srs"
		case "source":
			format = "source"
		case "":
			p := rs.s("path") + rs.s("url")
			switch {
			case strings.HasSuffix(p, ".srs"):
				format = "srs"
			case strings.HasSuffix(p, ".json"):
				format = "source"
			default:
				c.dropSet(rs.line, item, tag, "not converted: no format")
				continue
			}
		default:
			c.dropSet(rs.line, item, tag, "not converted: format "+strconv.Quote(f))
			continue
		}
		t := &table{header: "rule_sets", array: true}
		t.set("tag", tag)
		switch typ := rs.s("type"); typ {
		case "local", "":
			if rs.s("path") == "" {
				c.dropSet(rs.line, item, tag, "not converted: no path")
				continue
			}
			t.set("path", rs.s("path"))
		case "remote":
			if rs.s("url") == "" {
				c.dropSet(rs.line, item, tag, "not converted: no url")
				continue
			}
			t.set("url", rs.s("url"))
			if iv := rs.s("update_interval"); iv != "" {
				if d, err := parseDuration(iv); err == nil && d > 0 {
					t.set("interval", d.String())
				} else {
					c.report(rs.lineOf("update_interval"), item, "update_interval %q is not a duration: the default is used", iv)
				}
			}
			if d := rs.s("download_detour"); d != "" {
				if tg, why := c.target(d); tg != "" {
					t.set("download_via", tg)
				} else {
					c.report(rs.lineOf("download_detour"), item, "download_detour: %s; downloaded directly", why)
				}
			}
		case "inline":
			c.dropSet(rs.line, item, tag, "not converted: an inline rule set; write its rules in a source file and give its path")
			continue
		default:
			c.dropSet(rs.line, item, tag, "not converted: type "+strconv.Quote(typ))
			continue
		}
		t.set("format", format)
		c.setTags[tag] = tag
		c.ruleSets = append(c.ruleSets, t)
	}
}
