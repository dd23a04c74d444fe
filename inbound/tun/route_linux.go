package tun

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Defaults of Route.
const (
	DefaultTable    = 2022
	DefaultPriority = 9000
)

// ruleSlots is how many rule priorities from Priority on are auto_route's.
// It installs one rule per family,
//
//	Priority  not fwmark Mark: lookup Table
//
// and in Table the routes into the device (route_address, or a default
// route) and throw routes for route_exclude_address and the device's own
// prefixes, which send those on to the next rules (main). A marked packet,
// one of the process's own sockets, never looks the table up, even where
// main has no route for it: it cannot loop into the device. A rule at
// one of these priorities, or any route in Table, is auto_route's: a start
// finds and removes what an earlier run left (a crash, SIGKILL).
const ruleSlots = 3

func (r *Route) table() int {
	if r.Table == 0 {
		return DefaultTable
	}
	return r.Table
}

func (r *Route) priority() int {
	if r.Priority == 0 {
		return DefaultPriority
	}
	return r.Priority
}

// installRoutes installs cfg.Route for the device and returns what removes
// it again. Stale entries of an earlier run are removed first; a failure
// removes what was installed.
func installRoutes(cfg Config) (func() error, error) {
	r := cfg.Route
	if r.Mark == 0 {
		return nil, errors.New("no socket mark: the process's own sockets would loop into the device")
	}
	link, err := netlink.LinkByName(cfg.Name)
	if err != nil {
		return nil, err
	}
	if err := removeRoutes(r); err != nil {
		return nil, fmt.Errorf("removing the entries of an earlier run: %w", err)
	}
	undo := func() error { return removeRoutes(r) }
	if err := addRoutes(r, cfg, link.Attrs().Index); err != nil {
		undo()
		return nil, err
	}
	return undo, nil
}

// families are the address families the device routes: those it has an
// address of.
func families(cfg Config) (v4, v6 bool) {
	for _, p := range cfg.Addresses {
		v4, v6 = v4 || p.Addr().Is4(), v6 || p.Addr().Is6()
	}
	return
}

func addRoutes(r *Route, cfg Config, index int) error {
	v4, v6 := families(cfg)
	include := r.Include
	if len(include) == 0 {
		if v4 {
			include = append(include, netip.MustParsePrefix("0.0.0.0/0"))
		}
		if v6 {
			include = append(include, netip.MustParsePrefix("::/0"))
		}
	}
	for _, p := range include {
		if (p.Addr().Is4() && !v4) || (p.Addr().Is6() && !v6) {
			continue
		}
		rt := &netlink.Route{LinkIndex: index, Dst: ipNet(p), Table: r.table(), Scope: netlink.SCOPE_LINK}
		if err := netlink.RouteReplace(rt); err != nil {
			return fmt.Errorf("route %s dev %s table %d: %w", p, cfg.Name, r.table(), err)
		}
	}
	exclude := append([]netip.Prefix(nil), r.Exclude...)
	for _, p := range cfg.Addresses {
		exclude = append(exclude, p.Masked())
	}
	for _, p := range exclude {
		rt := &netlink.Route{Dst: ipNet(p), Table: r.table(), Type: unix.RTN_THROW}
		if err := netlink.RouteReplace(rt); err != nil {
			return fmt.Errorf("route throw %s table %d: %w", p, r.table(), err)
		}
	}
	for _, fam6 := range []bool{false, true} {
		if (!fam6 && !v4) || (fam6 && !v6) {
			continue
		}
		rule := newRule(fam6, r.priority(), r.table())
		rule.Mark, rule.Invert = r.Mark, true
		if err := netlink.RuleAdd(rule); err != nil {
			return fmt.Errorf("rule %s: %w", rule, err)
		}
	}
	return nil
}

func newRule(v6 bool, priority, table int) *netlink.Rule {
	rule := netlink.NewRule()
	rule.Family = unix.AF_INET
	if v6 {
		rule.Family = unix.AF_INET6
	}
	rule.Priority, rule.Table = priority, table
	return rule
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// removeRoutes removes every rule at auto_route's priorities and every
// route of its table, of both families.
func removeRoutes(r *Route) error {
	var errs []error
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rules, err := netlink.RuleList(fam)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range rules {
			rule := &rules[i]
			if rule.Priority < r.priority() || rule.Priority >= r.priority()+ruleSlots {
				continue
			}
			if err := netlink.RuleDel(rule); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("removing rule %s: %w", rule, err))
			}
		}
		routes, err := netlink.RouteListFiltered(fam, &netlink.Route{Table: r.table()}, netlink.RT_FILTER_TABLE)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range routes {
			if err := netlink.RouteDel(&routes[i]); err != nil && !errors.Is(err, unix.ESRCH) {
				errs = append(errs, fmt.Errorf("removing route %s: %w", routes[i].Dst, err))
			}
		}
	}
	return errors.Join(errs...)
}
