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

// ruleSlots is how many rule priorities auto_route uses from Priority on:
//
//	Priority+0  to each of the device's own prefixes and route_exclude_address: lookup main
//	Priority+1  fwmark Mark (the process's own sockets): lookup main
//	Priority+2  not fwmark Mark: lookup Table (the routes into the device)
//
// A marked packet never looks the table up, even where main has no route
// for it: the process's own sockets cannot loop into the device.
//
// A rule at one of these priorities, or any route in Table, is auto_route's:
// a start finds and removes what an earlier run left (a crash, SIGKILL).
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
	var rules []*netlink.Rule
	exclude := append([]netip.Prefix(nil), r.Exclude...)
	for _, p := range cfg.Addresses {
		exclude = append(exclude, p.Masked())
	}
	for _, p := range exclude {
		rule := newRule(p.Addr().Is6(), r.priority(), unix.RT_TABLE_MAIN)
		rule.Dst = ipNet(p)
		rules = append(rules, rule)
	}
	for _, fam6 := range []bool{false, true} {
		if (!fam6 && !v4) || (fam6 && !v6) {
			continue
		}
		mark := newRule(fam6, r.priority()+1, unix.RT_TABLE_MAIN)
		mark.Mark = r.Mark
		all := newRule(fam6, r.priority()+2, r.table())
		all.Mark, all.Invert = r.Mark, true
		rules = append(rules, mark, all)
	}
	for _, rule := range rules {
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
