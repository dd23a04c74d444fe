package netx

import (
	"context"
	"net/netip"
	"testing"
	"time"
)

type plainResolver struct{}

func (plainResolver) LookupIP(context.Context, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil
}

type ttlResolver struct{ plainResolver }

func (ttlResolver) LookupIPTTL(context.Context, string) ([]netip.Addr, time.Duration, error) {
	return []netip.Addr{netip.MustParseAddr("192.0.2.2")}, 42 * time.Second, nil
}

func TestLookupIPTTLUsesTheResolversTTLWhenItHasOne(t *testing.T) {
	ips, ttl, err := LookupIPTTL(context.Background(), plainResolver{}, "a.test")
	if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("192.0.2.1") || ttl != DefaultTTL {
		t.Fatalf("a resolver without TTLs: %v %v %v", ips, ttl, err)
	}
	ips, ttl, err = LookupIPTTL(context.Background(), ttlResolver{}, "a.test")
	if err != nil || len(ips) != 1 || ips[0] != netip.MustParseAddr("192.0.2.2") || ttl != 42*time.Second {
		t.Fatalf("a TTL resolver: %v %v %v", ips, ttl, err)
	}
}
