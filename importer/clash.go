package importer

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// clash converts a Clash / mihomo configuration.
func (c *conv) clash(root *yaml.Node) {
	for name, tag := range map[string]string{"DIRECT": "direct", "REJECT": "block", "REJECT-DROP": "block"} {
		c.targets[name] = tag
	}
	handled := map[string]bool{}
	each := func(key string, f func(p pair)) {
		handled[key] = true
		for _, p := range pairs(root) {
			if p.key == key {
				f(p)
			}
		}
	}
	each("mode", func(p pair) { c.clashMode(p) })
	each("log-level", func(p pair) { c.clashLogLevel(p) })
	each("routing-mark", func(p pair) {
		if n, err := strconv.ParseInt(scalar(p.val), 10, 64); err == nil && n > 0 {
			section(&c.socket, "socket").set("mark", n)
		}
	})
	each("interface-name", func(p pair) {
		if s := scalar(p.val); s != "" {
			section(&c.socket, "socket").set("interface", s)
		}
	})
	c.clashAPI(root, handled)
	c.clashInbounds(root, handled)
	each("proxies", func(p pair) { c.clashProxies(p.val) })
	each("proxy-providers", func(p pair) { c.clashProviders(p.val) })
	each("proxy-groups", func(p pair) { c.clashGroups(p.val) })
	for _, f := range c.later {
		f()
	}
	each("rule-providers", func(p pair) { c.clashRuleProviders(p.val) })
	each("rules", func(p pair) { c.clashRules(p.val) })
	each("dns", func(p pair) { c.clashDNS(p.val) })
	if c.geoIP {
		section(&c.route, "route").set("geoip_path", "Country.mmdb")
	}
	for _, p := range pairs(root) {
		if !handled[p.key] {
			c.report(p.line, p.key, "not converted: switchyard has no equivalent")
		}
	}
}

func (c *conv) clashMode(p pair) {
	switch m := strings.ToLower(scalar(p.val)); m {
	case "rule", "":
	case "global", "direct":
		section(&c.route, "route").set("mode", m)
	default:
		c.report(p.line, "mode", "%q is not a mode switchyard has (rule, global, direct)", m)
	}
}

func (c *conv) clashLogLevel(p pair) {
	lv := strings.ToLower(scalar(p.val))
	switch lv {
	case "warning":
		lv = "warn"
	case "silent":
		c.report(p.line, "log-level", "silent: switchyard always logs errors; written as error")
		lv = "error"
	}
	switch lv {
	case "debug", "info", "warn", "error":
		section(&c.log, "log").set("level", lv)
	default:
		c.report(p.line, "log-level", "%q is not a log level", lv)
	}
}

// clashAPI converts external-controller and secret into [api].
func (c *conv) clashAPI(root *yaml.Node, handled map[string]bool) {
	for _, k := range []string{"external-controller", "secret", "external-ui"} {
		handled[k] = true
	}
	var listen, secret string
	var line int
	for _, p := range pairs(root) {
		switch p.key {
		case "external-controller":
			listen, line = scalar(p.val), p.line
		case "secret":
			secret = scalar(p.val)
		case "external-ui":
			c.report(p.line, "external-ui", "not converted: mihomo's ui folder; give switchyard's [api].external_ui the folder of a dashboard's built files")
		}
	}
	if listen == "" {
		return
	}
	if strings.HasPrefix(listen, ":") {
		listen = "0.0.0.0" + listen
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		c.report(line, "external-controller", "%q is not host:port: not converted", listen)
		return
	}
	if a, err := netip.ParseAddr(host); (err != nil || !a.IsLoopback()) && host != "localhost" && secret == "" {
		c.report(line, "external-controller", "%s without a secret: switchyard serves its API off loopback only with one; listening on 127.0.0.1 instead", listen)
		listen = net.JoinHostPort("127.0.0.1", port)
	}
	t := section(&c.api, "api")
	t.set("listen", listen)
	if secret != "" {
		t.set("secret", secret)
	}
}

// clashInbounds converts the port keys and mihomo listeners.
func (c *conv) clashInbounds(root *yaml.Node, handled map[string]bool) {
	for _, k := range []string{"port", "socks-port", "mixed-port", "redir-port", "tproxy-port",
		"bind-address", "allow-lan", "authentication", "skip-auth-prefixes", "listeners", "tun"} {
		handled[k] = true
	}
	host := "127.0.0.1"
	if getBool(root, "allow-lan") {
		switch b := getStr(root, "bind-address"); b {
		case "", "*":
			host = "0.0.0.0"
		default:
			if a, err := netip.ParseAddr(b); err == nil && a.Is6() {
				host = "[" + b + "]"
			} else {
				host = b
			}
		}
	}
	var users []any
	for _, n := range items(get(root, "authentication")) {
		u, pw, ok := strings.Cut(scalar(n), ":")
		if !ok || u == "" {
			c.report(n.Line, "authentication", "an entry is user:password; this one is not converted")
			continue
		}
		users = append(users, inline{{"username", u}, {"password", pw}})
	}
	for _, p := range pairs(root) {
		var typ, tag string
		switch p.key {
		case "mixed-port":
			typ, tag = "mixed", "mixed-in"
		case "socks-port":
			typ, tag = "socks", "socks-in"
		case "port":
			typ, tag = "http", "http-in"
		case "redir-port", "tproxy-port":
			if scalar(p.val) != "0" {
				c.report(p.line, p.key, "not converted: switchyard has no transparent-proxy inbound (redirect or TPROXY)")
			}
			continue
		case "skip-auth-prefixes":
			c.report(p.line, p.key, "not converted: with users set, every client authenticates")
			continue
		case "tun":
			if getBool(p.val, "enable") {
				c.clashTUN(p.val, p.line, "tun")
			}
			continue
		case "listeners":
			c.clashListeners(p.val, users)
			continue
		default:
			continue
		}
		port, err := strconv.ParseUint(scalar(p.val), 10, 16)
		if err != nil {
			c.report(p.line, p.key, "%q is not a port: not converted", scalar(p.val))
			continue
		}
		if port == 0 {
			continue
		}
		t := &table{header: "inbounds", array: true}
		t.set("tag", tag)
		t.set("type", typ)
		t.set("listen", fmt.Sprintf("%s:%d", host, port))
		if len(users) > 0 {
			t.set("users", users)
		}
		c.addInbound(p.line, p.key, t)
	}
}

// clashListeners converts mihomo's listeners of type mixed, socks and http.
func (c *conv) clashListeners(n *yaml.Node, users []any) {
	for _, l := range items(n) {
		name := getStr(l, "name")
		typ := getStr(l, "type")
		item := "listener " + strconv.Quote(name)
		switch typ {
		case "mixed", "socks", "http":
		case "tun":
			c.clashTUN(l, l.Line, item)
			continue
		default:
			c.report(l.Line, item, "not converted: switchyard has no %s inbound (mixed, socks and http are converted)", typ)
			continue
		}
		port, err := strconv.ParseUint(getStr(l, "port"), 10, 16)
		if err != nil || port == 0 {
			c.report(l.Line, item, "no port: not converted")
			continue
		}
		host := getStr(l, "listen")
		if host == "" {
			host = "0.0.0.0"
		}
		if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
			host = "[" + host + "]"
		}
		tag := name
		if tag == "" || c.inTags[tag] {
			tag = fmt.Sprintf("%s-in-%d", typ, port)
		}
		t := &table{header: "inbounds", array: true}
		t.set("tag", tag)
		t.set("type", typ)
		t.set("listen", fmt.Sprintf("%s:%d", host, port))
		own := users
		if u := get(l, "users"); u != nil {
			own = nil
			for _, e := range items(u) {
				if name := getStr(e, "username"); name != "" {
					own = append(own, inline{{"username", name}, {"password", getStr(e, "password")}})
				}
			}
		}
		if len(own) > 0 {
			t.set("users", own)
		}
		if typ != "http" && get(l, "udp") != nil && !getBool(l, "udp") {
			t.set("udp", false)
		}
		if c.addInbound(l.Line, item, t) && name != "" {
			c.targets["inbound:"+name] = tag
		}
	}
}
