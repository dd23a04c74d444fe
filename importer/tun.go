package importer

import (
	"errors"
	"net"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"switchyard/config"
)

// tunSettings are the keys of a TUN inbound in switchyard's terms, read
// from either format.
type tunSettings struct {
	name                  string
	addresses             []string
	mtu                   int64
	autoRoute, noHijack   bool
	strict                bool
	routeAddress, exclude []string
}

// addTUN appends a tun inbound when the loader takes one; otherwise the
// item is reported with the loader's reason.
func (c *conv) addTUN(line int, item string, s tunSettings) {
	t := &table{header: "inbounds", array: true}
	tag := "tun-in"
	for i := 2; c.inTags[tag]; i++ {
		tag = "tun-in-" + strconv.Itoa(i)
	}
	t.set("tag", tag)
	t.set("type", "tun")
	if s.name != "" {
		t.set("name", s.name)
	}
	if len(s.addresses) > 0 {
		t.set("addresses", s.addresses)
	}
	if s.mtu > 0 {
		t.set("mtu", s.mtu)
	}
	if s.autoRoute {
		t.set("auto_route", true)
		if s.strict {
			t.set("strict_route", true)
		}
	}
	if len(s.routeAddress) > 0 {
		t.set("route_address", s.routeAddress)
	}
	if len(s.exclude) > 0 {
		t.set("route_exclude_address", s.exclude)
	}
	if s.noHijack {
		t.set("dns_hijack", false)
	}
	c.addInbound(line, item, t)
}

// addInbound appends an inbound the loader takes on its own and whose
// listen address no inbound before it has; otherwise the item is reported.
func (c *conv) addInbound(line int, item string, t *table) bool {
	if why := checkInbound(t); why != "" {
		c.report(line, item, "not converted: %s", why)
		return false
	}
	if l, ok := t.get("listen"); ok {
		host, port, _ := net.SplitHostPort(l.(string))
		for _, o := range c.inbounds {
			ol, ok := o.get("listen")
			if !ok {
				continue
			}
			oh, op, _ := net.SplitHostPort(ol.(string))
			if op == port && (oh == host || wildcard(oh) || wildcard(host)) {
				other, _ := o.get("tag")
				c.report(line, item, "not converted: its listen address %s overlaps %s of inbound %q", l, ol, other)
				return false
			}
		}
	}
	tag, _ := t.get("tag")
	c.inTags[tag.(string)] = true
	c.inbounds = append(c.inbounds, t)
	return true
}

func wildcard(host string) bool { return host == "0.0.0.0" || host == "::" }

// checkInbound lowers one inbound table on its own with the loader and
// says why it is refused ("" when it is taken).
func checkInbound(t *table) string {
	_, _, err := config.Parse(render(nil, []*table{t}), "import")
	if err == nil {
		return ""
	}
	var errs config.Errors
	if !errors.As(err, &errs) {
		return err.Error()
	}
	var why []string
	for _, e := range errs {
		if strings.Contains(e.Msg, `unknown inbound type "tun"`) {
			return "this version's loader has no tun inbound"
		}
		why = append(why, strings.TrimPrefix(e.Key, "inbounds[0].")+": "+e.Msg)
	}
	return strings.Join(why, "; ")
}

// clashTUN converts mihomo's tun section, or a listener of type tun
// (item names it).
func (c *conv) clashTUN(n *yaml.Node, line int, item string) {
	var s tunSettings
	s.name = getStr(n, "device")
	for _, k := range []string{"inet4-address", "inet6-address"} {
		s.addresses = append(s.addresses, strs(get(n, k))...)
	}
	if m, err := strconv.ParseInt(getStr(n, "mtu"), 10, 64); err == nil {
		s.mtu = m
	}
	s.autoRoute = getBool(n, "auto-route")
	s.routeAddress = append(strs(get(n, "route-address")), append(strs(get(n, "inet4-route-address")), strs(get(n, "inet6-route-address"))...)...)
	s.exclude = append(strs(get(n, "route-exclude-address")), append(strs(get(n, "inet4-route-exclude-address")), strs(get(n, "inet6-route-exclude-address"))...)...)
	s.noHijack = len(strs(get(n, "dns-hijack"))) == 0
	s.strict = getBool(n, "strict-route")
	if s.strict && !s.autoRoute {
		c.report(lineOf(get(n, "strict-route")), item, "strict-route is not converted: without auto-route there are no routes for it to guard")
	}
	c.addTUN(line, item, s)
}

// sbTUN converts a sing-box tun inbound.
func (c *conv) sbTUN(in *jnode, item string) {
	var s tunSettings
	s.name = in.s("interface_name")
	s.addresses = append(in.strs("address"), append(in.strs("inet4_address"), in.strs("inet6_address")...)...)
	s.mtu, _ = in.int("mtu")
	s.autoRoute = in.boolean("auto_route")
	s.routeAddress = append(in.strs("route_address"), append(in.strs("inet4_route_address"), in.strs("inet6_route_address")...)...)
	s.exclude = append(in.strs("route_exclude_address"), append(in.strs("inet4_route_exclude_address"), in.strs("inet6_route_exclude_address")...)...)
	s.strict = in.boolean("strict_route")
	if s.strict && !s.autoRoute {
		c.report(in.lineOf("strict_route"), item, "strict_route is not converted: without auto_route there are no routes for it to guard")
	}
	c.addTUN(in.line, item, s)
}
