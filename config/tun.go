package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"switchyard/ruleset"
	"switchyard/spec"
)

// Defaults and bounds of a tun inbound.
const (
	defaultTUNName       = "sy0"
	defaultTUNMTU        = 9000
	defaultTUNUDPTimeout = 5 * time.Minute
	// defaultTUNAssociations bounds a tun's UDP associations: one per
	// local endpoint of every application on the machine.
	defaultTUNAssociations = 4096
	// defaultTUNMark is the socket mark set when auto_route is on and
	// [socket] has none: auto_route's rules send the process's own
	// sockets, marked so, around the device.
	defaultTUNMark = 0x2023
	maxTUNName     = 15 // IFNAMSIZ - 1
)

// defaultTUNAddresses are the device's addresses when addresses is left out.
var defaultTUNAddresses = []netip.Prefix{
	netip.MustParsePrefix("172.19.0.1/30"),
	netip.MustParsePrefix("fdfe:dcba:9876::1/126"),
}

// tunInbound lowers the keys of a tun inbound; the keys of the listening
// types are refused.
func (l *lowerer) tunInbound(key string, f *fileInbound, in *spec.Inbound, names map[string]string) {
	listening := map[string]bool{
		"listen": f.Listen != nil, "users": f.Users != nil, "socks4": f.SOCKS4,
		"udp": f.UDP != nil, "handshake_timeout": f.HandshakeTimeout != nil,
	}
	for _, k := range []string{"listen", "users", "socks4", "udp", "handshake_timeout"} {
		if listening[k] {
			l.errorf(key+"."+k, "a tun inbound has no %s: it takes what the machine routes into its device", k)
		}
	}
	t := &spec.TUN{Name: defaultTUNName, MTU: defaultTUNMTU, UDPTimeout: defaultTUNUDPTimeout, DNSHijack: l.dnsTable}
	if f.Name != nil {
		t.Name = *f.Name
		if n := *f.Name; n == "" || len(n) > maxTUNName || strings.ContainsAny(n, "/ \t\n:") || n == "." || n == ".." {
			l.errorf(key+".name", "%q is not a device name (1 to %d bytes, no '/', ':' or space)", n, maxTUNName)
		}
	}
	if f.Addresses == nil {
		t.Addresses = slices.Clone(defaultTUNAddresses)
	} else {
		t.Addresses = l.tunAddresses(key+".addresses", f.Addresses)
	}
	t.MTU = l.deviceMTU(key+".mtu", f.MTU, t.Addresses, defaultTUNMTU, "device")
	if f.DNSHijack != nil {
		t.DNSHijack = *f.DNSHijack
		if t.DNSHijack && !l.dnsTable {
			l.errorf(key+".dns_hijack", "dns_hijack needs a [dns] table: its DNS service answers the hijacked queries")
		}
	}
	l.tunHijack = l.tunHijack || t.DNSHijack
	if f.UDPTimeout != nil {
		if d := l.positiveDuration(key+".udp_timeout", *f.UDPTimeout, ""); d > 0 {
			t.UDPTimeout = d
		}
	}
	if f.AutoRoute != nil {
		t.AutoRoute = *f.AutoRoute
	}
	// strict_route: while auto_route is on, what would bypass the device
	// (no route in its table: before the device is up, while a reload
	// recreates it; a socket bound to another interface) is unreachable
	// instead of leaking through main. Its rules go in before the device
	// and out after it; after a SIGKILL they stay, blocking, until the
	// next start replaces them.
	if f.StrictRoute != nil {
		t.StrictRoute = *f.StrictRoute
		if t.StrictRoute && !t.AutoRoute {
			l.errorf(key+".strict_route", "strict_route blocks what bypasses auto_route's rules: it needs auto_route = true")
		}
	}
	t.RouteAddress = l.routePrefixes(key+".route_address", f.RouteAddress, t.AutoRoute)
	t.RouteExclude = l.routePrefixes(key+".route_exclude_address", f.RouteExcludeAddress, t.AutoRoute)
	in.TUN = t
	in.Sniff = f.Sniff
	in.MaxUDPAssociations = defaultTUNAssociations
	if n := f.MaxUDPAssociations; n != nil {
		if *n < 1 || *n > 1<<20 {
			l.errorf(key+".max_udp_associations", "%d is out of range 1..%d", *n, 1<<20)
		} else {
			in.MaxUDPAssociations = int(*n)
		}
	}
	_, in.MaxHandshakes = l.handshakes(key, f)
	if prev, dup := names[t.Name]; dup {
		l.errorf(key+".name", "device %s is already the device of %s", t.Name, prev)
	}
	names[t.Name] = key
}

// noTUNKeys refuses a tun's keys on another inbound type.
func (l *lowerer) noTUNKeys(key string, f *fileInbound) {
	set := map[string]bool{
		"name": f.Name != nil, "addresses": f.Addresses != nil, "mtu": f.MTU != nil,
		"auto_route": f.AutoRoute != nil, "strict_route": f.StrictRoute != nil,
		"route_address": f.RouteAddress != nil, "route_exclude_address": f.RouteExcludeAddress != nil,
		"dns_hijack": f.DNSHijack != nil, "udp_timeout": f.UDPTimeout != nil,
	}
	for _, k := range []string{"name", "addresses", "mtu", "auto_route", "strict_route", "route_address", "route_exclude_address", "dns_hijack", "udp_timeout"} {
		if set[k] {
			l.errorf(key+"."+k, `%s is a key of type "tun"`, k)
		}
	}
}

// tunAddresses lowers the device's addresses: each an address with its
// prefix length, at least one.
func (l *lowerer) tunAddresses(key string, vs []string) []netip.Prefix {
	if len(vs) == 0 {
		l.errorf(key, "a tun device needs at least one address")
		return nil
	}
	var out []netip.Prefix
	eachString(key, vs, func(ekey, v string) {
		p, ok := parseTunnelAddress(v)
		switch {
		case !ok:
			l.errorf(ekey, "%q is not an address with a prefix length (such as \"172.19.0.1/30\", \"fdfe:dcba:9876::1/126\")", v)
		case p.Addr().IsUnspecified() || p.Addr().IsMulticast() || p.Addr().IsLoopback():
			l.errorf(ekey, "%s cannot be a device address", p.Addr())
		case slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Addr() == p.Addr() }):
			l.errorf(ekey, "duplicate address %s", p.Addr())
		default:
			out = append(out, p)
		}
	})
	return out
}

// routePrefixes lowers route_address or route_exclude_address, which mean
// something only with auto_route.
func (l *lowerer) routePrefixes(key string, vs []string, autoRoute bool) []netip.Prefix {
	if len(vs) > 0 && !autoRoute {
		l.errorf(key, "routes are installed only with auto_route = true")
		return nil
	}
	var out []netip.Prefix
	eachString(key, vs, func(ekey, v string) {
		p, ok := ruleset.ParsePrefix(v)
		if !ok {
			l.errorf(ekey, "%q is not a prefix (such as \"10.0.0.0/8\") or an address", v)
			return
		}
		out = append(out, p)
	})
	return out
}

// tunSocket gives the process's sockets the mark auto_route's rules let
// around the device, when [socket] sets none.
func tunSocket(s *spec.Spec) {
	if s.Socket.Mark != 0 {
		return
	}
	for _, in := range s.Inbounds {
		if in.TUN != nil && in.TUN.AutoRoute {
			s.Socket.Mark = defaultTUNMark
			return
		}
	}
}

// tunDNSLoop refuses a tun that routes everything into its device and
// hijacks DNS while the DNS service asks the system resolver: the system
// resolver's queries carry no socket mark, so they would enter the device
// and be hijacked back into the DNS service.
func (l *lowerer) tunDNSLoop(s *spec.Spec) {
	if s.DNS == nil {
		return
	}
	servers := slices.Concat(s.DNS.Servers, s.DNS.PreProxy, s.DNS.ThroughProxy)
	for _, r := range s.DNS.Rules {
		servers = append(servers, r.Servers...)
	}
	if !slices.Contains(servers, "system") {
		return
	}
	for i, in := range s.Inbounds {
		if in.TUN != nil && in.TUN.AutoRoute && in.TUN.DNSHijack {
			l.errorf(fmt.Sprintf("inbounds[%d].dns_hijack", i), "the DNS service asks the system resolver, whose queries would enter the device and be hijacked back into the service: give [dns] servers by address, or set dns_hijack = false")
		}
	}
}
