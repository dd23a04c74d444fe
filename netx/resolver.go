package netx

import (
	"context"
	"net"
	"net/netip"
)

// Resolver looks up the IP addresses of a host name.
type Resolver interface {
	LookupIP(ctx context.Context, host string) ([]netip.Addr, error)
}

// SystemResolver asks the operating system (getaddrinfo or Go's resolver).
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
