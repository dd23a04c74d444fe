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
// It installs, per family the device has an address of,
//
//	Priority    not fwmark Mark: lookup Table
//
// and in Table the routes into the device (route_address, or a default
// route) and throw routes for route_exclude_address and the device's own
// prefixes, which send those on to the next rules (main). A marked packet,
// one of the process's own sockets, never looks the table up, even where
// main has no route for it: it cannot loop into the device.
//
// strict_route adds, per family,
//
//	Priority+1  to X: lookup main       (X: route_exclude_address, the device's prefixes)
//	Priority+2  not fwmark Mark [to I]: unreachable   (I: route_address; none: all)
//
// so that what Table has no route for — the device is not up yet, is
// being recreated by a reload, or is gone, or a socket bound to another
// interface (SO_BINDTODEVICE) whose lookup skips the device's routes —
// is refused instead of falling through to main. A family the device has
// no address of is refused whole (its traffic cannot enter the device, so
// it would leak). The strict rules are installed before the device is
// created and removed after it is closed; a reload that recreates the
// device leaves them to its successor, which replaces them in place.
//
// A rule at one of these priorities, or any route in Table, is
// auto_route's: a start finds and removes (strict: replaces) what an
// earlier run left (a crash, SIGKILL).
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
// removes what was installed. With Strict the rules are already in place
// (installStrict): only the table's routes are installed and removed here.
func installRoutes(cfg Config) (func() error, error) {
	r := cfg.Route
	if r.Mark == 0 {
		return nil, errors.New("no socket mark: the process's own sockets would loop into the device")
	}
	link, err := netlink.LinkByName(cfg.Name)
	if err != nil {
		return nil, err
	}
	remove := func() error { return errors.Join(removeRules(r), removeTable(r)) }
	if r.Strict {
		remove = func() error { return removeTable(r) }
	}
	if err := remove(); err != nil {
		return nil, fmt.Errorf("removing the entries of an earlier run: %w", err)
	}
	if err := addRoutes(r, cfg, link.Attrs().Index); err != nil {
		remove()
		return nil, err
	}
	if !r.Strict {
		if err := addRules(rules(r, cfg), nil); err != nil {
			remove()
			return nil, err
		}
	}
	return remove, nil
}

// installStrict puts strict_route's rules (and the rule into Table) in
// place before the device exists, replacing those an earlier run or the
// inbound's predecessor left without a moment between the two where
// neither is installed. It returns what removes them, and whether rules
// were there before (a failure then leaves them: they block, as they did).
func installStrict(cfg Config) (unblock func() error, had bool, err error) {
	r := cfg.Route
	if r.Mark == 0 {
		return nil, false, errors.New("no socket mark: the process's own sockets would loop into the device")
	}
	existing, err := listRules(r)
	if err != nil {
		return nil, false, err
	}
	unblock = func() error { return removeRules(r) }
	keep := map[string]bool{}
	if err := addRules(rules(r, cfg), func(rule *netlink.Rule) bool {
		k := ruleKey(rule)
		for _, e := range existing {
			if ruleKey(&e) == k {
				keep[k] = true
				return true
			}
		}
		return false
	}); err != nil {
		if len(existing) == 0 {
			unblock()
		}
		return nil, len(existing) > 0, err
	}
	var errs []error
	for i := range existing {
		if e := &existing[i]; !keep[ruleKey(e)] {
			if err := netlink.RuleDel(e); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("removing rule %s: %w", e, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, true, fmt.Errorf("removing the rules of an earlier run: %w", err)
	}
	return unblock, len(existing) > 0, nil
}

// ruleKey identifies a rule by what auto_route sets (a listed rule does not
// carry its action: at Priority+2 it is always unreachable).
func ruleKey(r *netlink.Rule) string {
	dst := ""
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	return fmt.Sprintf("%d/%d/%v/%#x/%d/%s", r.Priority, r.Family, r.Invert, r.Mark, r.Table, dst)
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
	for _, p := range excluded(r, cfg) {
		rt := &netlink.Route{Dst: ipNet(p), Table: r.table(), Type: unix.RTN_THROW}
		if err := netlink.RouteReplace(rt); err != nil {
			return fmt.Errorf("route throw %s table %d: %w", p, r.table(), err)
		}
	}
	return nil
}

// excluded are the destinations that never enter the device:
// route_exclude_address and the device's own prefixes.
func excluded(r *Route, cfg Config) []netip.Prefix {
	out := append([]netip.Prefix(nil), r.Exclude...)
	for _, p := range cfg.Addresses {
		out = append(out, p.Masked())
	}
	return out
}

// rules are auto_route's policy rules for r (see ruleSlots).
func rules(r *Route, cfg Config) []*netlink.Rule {
	v4, v6 := families(cfg)
	var out []*netlink.Rule
	for _, fam6 := range []bool{false, true} {
		has := (!fam6 && v4) || (fam6 && v6)
		if has {
			rule := newRule(fam6, r.priority(), r.table())
			rule.Mark, rule.Invert = r.Mark, true
			out = append(out, rule)
		}
		if !r.Strict {
			continue
		}
		if has {
			for _, p := range excluded(r, cfg) {
				if p.Addr().Is6() == fam6 {
					rule := newRule(fam6, r.priority()+1, unix.RT_TABLE_MAIN)
					rule.Dst = ipNet(p)
					out = append(out, rule)
				}
			}
		}
		var blocked []netip.Prefix
		for _, p := range r.Include {
			if p.Addr().Is6() == fam6 {
				blocked = append(blocked, p)
			}
		}
		if len(r.Include) > 0 && len(blocked) == 0 {
			continue // route_address leaves this family alone
		}
		if len(blocked) == 0 {
			rule := newRule(fam6, r.priority()+2, 0)
			rule.Mark, rule.Invert, rule.Type = r.Mark, true, unix.RTN_UNREACHABLE
			out = append(out, rule)
		}
		for _, p := range blocked {
			rule := newRule(fam6, r.priority()+2, 0)
			rule.Mark, rule.Invert, rule.Type, rule.Dst = r.Mark, true, unix.RTN_UNREACHABLE, ipNet(p)
			out = append(out, rule)
		}
	}
	return out
}

// addRules adds rs, but those skip reports as already in place.
func addRules(rs []*netlink.Rule, skip func(*netlink.Rule) bool) error {
	for _, rule := range rs {
		if skip != nil && skip(rule) {
			continue
		}
		if err := netlink.RuleAdd(rule); err != nil && !errors.Is(err, unix.EEXIST) {
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

// listRules lists the rules at auto_route's priorities, of both families.
func listRules(r *Route) ([]netlink.Rule, error) {
	var out []netlink.Rule
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rules, err := netlink.RuleList(fam)
		if err != nil {
			return nil, err
		}
		for _, rule := range rules {
			if rule.Priority >= r.priority() && rule.Priority < r.priority()+ruleSlots {
				out = append(out, rule)
			}
		}
	}
	return out, nil
}

// removeRules removes every rule at auto_route's priorities.
func removeRules(r *Route) error {
	rules, err := listRules(r)
	if err != nil {
		return err
	}
	var errs []error
	for i := range rules {
		if err := netlink.RuleDel(&rules[i]); err != nil && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("removing rule %s: %w", &rules[i], err))
		}
	}
	return errors.Join(errs...)
}

// removeTable removes every route of auto_route's table, of both families.
func removeTable(r *Route) error {
	var errs []error
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
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
