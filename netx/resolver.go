package netx

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// Resolver looks up the IP addresses of a host name.
type Resolver interface {
	LookupIP(ctx context.Context, host string) ([]netip.Addr, error)
}

// TTLResolver is a Resolver that also knows how long its answer stays valid
// (a DNS client reading the records' TTL). It is an optional ability:
// LookupIPTTL checks for it.
type TTLResolver interface {
	Resolver
	LookupIPTTL(ctx context.Context, host string) ([]netip.Addr, time.Duration, error)
}

// DefaultTTL is how long the answer of a resolver that reports no TTL (the
// system resolver) is taken to stay valid.
const DefaultTTL = time.Minute

// LookupIPTTL looks host up with r and returns how long the answer stays
// valid: the TTL r reports when it is a TTLResolver, DefaultTTL otherwise.
func LookupIPTTL(ctx context.Context, r Resolver, host string) ([]netip.Addr, time.Duration, error) {
	if tr, ok := r.(TTLResolver); ok {
		return tr.LookupIPTTL(ctx, host)
	}
	ips, err := r.LookupIP(ctx, host)
	return ips, DefaultTTL, err
}

// SystemResolver asks the operating system (getaddrinfo or Go's resolver).
// It cannot see TTLs.
type SystemResolver struct{}

func (SystemResolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	for i := range ips {
		ips[i] = ips[i].Unmap()
	}
	return ips, nil
}
