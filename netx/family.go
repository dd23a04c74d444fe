package netx

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// Strategy is an address-family strategy: which resolved addresses are used,
// in which order.
type Strategy uint8

const (
	Auto       Strategy = iota // the resolver's order
	IPv4Only                   // IPv4 addresses only
	IPv6Only                   // IPv6 addresses only
	PreferIPv4                 // IPv4 first, IPv6 kept as a fallback
	PreferIPv6                 // IPv6 first, IPv4 kept as a fallback
)

var strategyNames = [...]string{"auto", "ipv4_only", "ipv6_only", "prefer_ipv4", "prefer_ipv6"}

func (s Strategy) String() string {
	if int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("strategy(%d)", uint8(s))
}

// ParseStrategy parses a config value; "" is auto.
func ParseStrategy(s string) (Strategy, error) {
	if s == "" {
		return Auto, nil
	}
	for i, n := range strategyNames {
		if n == s {
			return Strategy(i), nil
		}
	}
	return Auto, fmt.Errorf("unknown address family %q (expected auto, ipv4_only, ipv6_only, prefer_ipv4 or prefer_ipv6)", s)
}

// Allows reports whether the strategy may use ip.
func (s Strategy) Allows(ip netip.Addr) bool {
	switch s {
	case IPv4Only:
		return ip.Unmap().Is4()
	case IPv6Only:
		return !ip.Unmap().Is4()
	}
	return true
}

// Order filters and orders candidates under the strategy. The slice is
// reordered in place and may be shortened.
func (s Strategy) Order(ips []netip.Addr) []netip.Addr {
	switch s {
	case IPv4Only, IPv6Only:
		return slices.DeleteFunc(ips, func(ip netip.Addr) bool { return !s.Allows(ip) })
	case PreferIPv4:
		slices.SortStableFunc(ips, func(a, b netip.Addr) int { return familyRank(a, true) - familyRank(b, true) })
	case PreferIPv6:
		slices.SortStableFunc(ips, func(a, b netip.Addr) int { return familyRank(a, false) - familyRank(b, false) })
	}
	return ips
}

func familyRank(ip netip.Addr, v4First bool) int {
	if ip.Unmap().Is4() == v4First {
		return 0
	}
	return 1
}

// ErrNotResolved is matched by an error for a name that resolved to nothing.
var ErrNotResolved = errors.New("dial: destination did not resolve")

// ErrNoUsableAddress is matched by an error for a name whose addresses are
// all of a family the strategy refuses.
var ErrNoUsableAddress = errors.New("no usable destination address")

type noUsableError struct {
	s   Strategy
	dst Addr
}

func (e *noUsableError) Error() string {
	return fmt.Sprintf("dial: no usable %s destination address for %s", e.s, e.dst)
}
func (e *noUsableError) Is(t error) bool { return t == ErrNoUsableAddress }

// Resolve turns dst into candidate socket addresses under strategy s: an IP
// is checked against the strategy, a name is resolved with r and ordered.
func Resolve(ctx context.Context, dst Addr, s Strategy, r Resolver) ([]netip.AddrPort, error) {
	var ips []netip.Addr
	if dst.IP.IsValid() {
		ips = []netip.Addr{dst.IP}
	} else {
		var err error
		Mark(ctx, PhaseResolve)
		ips, err = r.LookupIP(ctx, dst.Name)
		if err != nil {
			return nil, err
		}
		if len(ips) == 0 {
			return nil, ErrNotResolved
		}
	}
	ips = s.Order(ips)
	if len(ips) == 0 {
		return nil, &noUsableError{s: s, dst: dst}
	}
	out := make([]netip.AddrPort, len(ips))
	for i, ip := range ips {
		out[i] = netip.AddrPortFrom(ip.Unmap(), dst.Port)
	}
	return out, nil
}
