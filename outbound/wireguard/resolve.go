package wireguard

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"switchyard/netx"
)

// ErrDestinationNotResolved is the failure of a destination name that
// resolved to nothing. It also matches netx.ErrNotResolved.
var ErrDestinationNotResolved error = notResolvedError{}

type notResolvedError struct{}

func (notResolvedError) Error() string        { return "wireguard: destination did not resolve" }
func (notResolvedError) Is(target error) bool { return target == netx.ErrNotResolved }

// noUsableError is the failure of a destination whose every address is of
// a family the address_family or the tunnel-local addresses rule out. It
// matches netx.ErrNoUsableAddress.
type noUsableError struct {
	strategy netx.Strategy
	dst      netx.Addr
	suffix   string // why the local addresses ruled them out, or ""
}

func (e *noUsableError) Error() string {
	return fmt.Sprintf("wireguard: no usable %s destination address for %s%s", e.strategy, e.dst, e.suffix)
}

func (e *noUsableError) Is(target error) bool { return target == netx.ErrNoUsableAddress }

// resolver turns destinations inside the tunnel into addresses: names with
// the destination resolver, then every candidate filtered by the
// address_family and by the families of the tunnel-local addresses, since
// the userspace stack has no routing table to ask.
type resolver struct {
	r        netx.Resolver
	strategy netx.Strategy
	families families
}

// candidates returns dst's usable addresses in the order to try them.
// Resolver errors pass through unchanged.
func (r *resolver) candidates(ctx context.Context, dst netx.Addr) ([]netip.AddrPort, error) {
	var ips []netip.Addr
	if dst.IP.IsValid() {
		ips = []netip.Addr{dst.IP.Unmap()}
	} else {
		found, err := r.r.LookupIP(ctx, dst.Name)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, ErrDestinationNotResolved
		}
		ips = slices.Clone(found) // the resolver may share its answer
	}
	ips = r.strategy.Order(ips)
	if len(ips) == 0 {
		return nil, &noUsableError{strategy: r.strategy, dst: dst}
	}
	out := make([]netip.AddrPort, 0, len(ips))
	for _, ip := range ips {
		if r.families.allows(ip) {
			out = append(out, netip.AddrPortFrom(ip.Unmap(), dst.Port))
		}
	}
	if len(out) == 0 {
		return nil, &noUsableError{strategy: r.strategy, dst: dst, suffix: r.families.suffix()}
	}
	return out, nil
}

// usable checks an IP destination against the same rules.
func (r *resolver) usable(dst netx.Addr) error {
	if !r.strategy.Allows(dst.IP) {
		return &noUsableError{strategy: r.strategy, dst: dst}
	}
	if !r.families.allows(dst.IP) {
		return &noUsableError{strategy: r.strategy, dst: dst, suffix: r.families.suffix()}
	}
	return nil
}
