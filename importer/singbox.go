package importer

import (
	"net"
	"strconv"
	"strings"
)

// singBoxKeys are top-level keys of which one marks a sing-box
// configuration.
var singBoxKeys = []string{"outbounds", "inbounds", "route", "dns", "endpoints", "log", "experimental"}

func isSingBox(root *jnode) bool {
	for _, k := range singBoxKeys {
		if root.has(k) {
			return true
		}
	}
	return false
}

// singBox converts a sing-box configuration.
func (c *conv) singBox(root *jnode) {
	handled := map[string]bool{}
	for _, k := range []string{"log", "inbounds", "outbounds", "endpoints", "route", "dns", "experimental"} {
		handled[k] = true
	}
	c.sbLog(root.get("log"))
	c.sbExperimental(root.get("experimental"))
	c.sbInbounds(root.get("inbounds"))
	var groups []*jnode
	for _, o := range root.list("outbounds") {
		switch o.s("type") {
		case "selector", "urltest":
			groups = append(groups, o)
		default:
			c.sbOutbound(o, "outbound")
		}
	}
	for _, e := range root.list("endpoints") {
		c.sbOutbound(e, "endpoint")
	}
	c.sbGroups(groups)
	route := root.get("route")
	c.sbRuleSets(route.get("rule_set"))
	c.sbDNS(root.get("dns"), route)
	c.sbRoute(route)
	root.each(func(k string, v *jnode) {
		if !handled[k] {
			c.report(v.line, k, "not converted: switchyard has no equivalent")
		}
	})
}

func (c *conv) sbLog(n *jnode) {
	if n == nil || n.boolean("disabled") {
		return
	}
	lv := n.s("level")
	switch lv {
	case "":
		return
	case "fatal", "panic":
		lv = "error"
	}
	switch lv {
	case "trace", "debug", "info", "warn", "error":
		section(&c.log, "log").set("level", lv)
	default:
		c.report(n.lineOf("level"), "log.level", "%q is not a log level", lv)
	}
}

func (c *conv) sbExperimental(n *jnode) {
	n.each(func(k string, v *jnode) {
		if k != "clash_api" {
			if k != "cache_file" {
				c.report(v.line, "experimental."+k, "not converted: switchyard has no equivalent")
			}
			return
		}
		listen := v.s("external_controller")
		if listen == "" {
			return
		}
		host, port, err := net.SplitHostPort(listen)
		if err != nil {
			c.report(v.lineOf("external_controller"), "experimental.clash_api.external_controller", "%q is not host:port: not converted", listen)
			return
		}
		secret := v.s("secret")
		if host != "127.0.0.1" && host != "::1" && host != "localhost" && secret == "" {
			c.report(v.lineOf("external_controller"), "experimental.clash_api.external_controller",
				"%s without a secret: switchyard serves its API off loopback only with one; listening on 127.0.0.1 instead", listen)
			listen = net.JoinHostPort("127.0.0.1", port)
		}
		t := section(&c.api, "api")
		t.set("listen", listen)
		if secret != "" {
			t.set("secret", secret)
		}
		if v.s("external_ui") != "" {
			c.report(v.lineOf("external_ui"), "experimental.clash_api.external_ui", "not converted: give [api].external_ui the folder of a dashboard's built files")
		}
	})
}

// sbInbounds converts inbounds of type mixed, socks and http.
func (c *conv) sbInbounds(n *jnode) {
	for _, in := range n.elems() {
		typ, tag := in.s("type"), in.s("tag")
		item := "inbound " + strconv.Quote(tag)
		switch typ {
		case "mixed", "socks", "http":
		case "tun":
			c.sbTUN(in, item)
			continue
		case "redirect", "tproxy":
			c.report(in.line, item, "not converted: switchyard has no transparent-proxy inbound (%s)", typ)
			continue
		default:
			c.report(in.line, item, "not converted: switchyard has no %s inbound (mixed, socks and http are converted)", typ)
			continue
		}
		port, ok := in.int("listen_port")
		if !ok || port <= 0 || port > 65535 {
			c.report(in.line, item, "no listen_port: not converted")
			continue
		}
		host := in.s("listen")
		if host == "" {
			host = "::"
		}
		if tag == "" || c.inTags[tag] {
			tag = typ + "-in-" + strconv.FormatInt(port, 10)
		}
		t := &table{header: "inbounds", array: true}
		t.set("tag", tag)
		t.set("type", typ)
		t.set("listen", net.JoinHostPort(host, strconv.FormatInt(port, 10)))
		var users []any
		for _, u := range in.list("users") {
			if name := u.s("username"); name != "" {
				users = append(users, inline{{"username", name}, {"password", u.s("password")}})
			}
		}
		if len(users) > 0 {
			t.set("users", users)
		}
		if in.boolean("sniff") {
			t.set("sniff", true)
		}
		in.each(func(k string, v *jnode) {
			switch k {
			case "type", "tag", "listen", "listen_port", "users", "sniff", "sniff_override_destination", "set_system_proxy":
			default:
				c.report(v.line, item, "%s is not converted", k)
			}
		})
		if c.addInbound(in.line, item, t) {
			c.targets["inbound:"+in.s("tag")] = tag
		}
	}
}

// sbServer writes server and server_port as host:port.
func sbServer(o *jnode) (string, bool) {
	host := o.s("server")
	port, ok := o.int("server_port")
	if host == "" || !ok || port <= 0 || port > 65535 {
		return "", false
	}
	return net.JoinHostPort(strings.Trim(host, "[]"), strconv.FormatInt(port, 10)), true
}

// sbStrategies maps a domain strategy to address_family.
var sbStrategies = map[string]string{
	"prefer_ipv4": "prefer_ipv4", "prefer_ipv6": "prefer_ipv6", "ipv4_only": "ipv4_only", "ipv6_only": "ipv6_only",
}
