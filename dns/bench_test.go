package dns

import (
	"context"
	"net/netip"
	"testing"

	mdns "github.com/miekg/dns"

	"switchyard/route"
	"switchyard/spec"
)

// cachedForBench is a resolver whose cache holds a.test (A and AAAA).
func cachedForBench(b *testing.B) *Resolver {
	b.Helper()
	z := newZone()
	r := newResolver(b, Options{}, "udp://"+startUDP(b, z).String())
	if _, err := r.LookupIP(context.Background(), "a.test"); err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkCacheHit is a LookupIP answered from the cache, the addresses
// copied into the caller's storage (AppendIP).
func BenchmarkCacheHit(b *testing.B) {
	r := cachedForBench(b)
	ctx := context.Background()
	buf := make([]netip.Addr, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		ips, _, err := r.AppendIP(ctx, buf[:0], "a.test")
		if err != nil || len(ips) != 2 {
			b.Fatal(ips, err)
		}
	}
}

// BenchmarkCacheHitLookupIP is the same through netx.Resolver's
// LookupIP, which hands the caller a slice of its own.
func BenchmarkCacheHitLookupIP(b *testing.B) {
	r := cachedForBench(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if ips, err := r.LookupIP(ctx, "a.test"); err != nil || len(ips) != 2 {
			b.Fatal(ips, err)
		}
	}
}

// BenchmarkCacheHitRouter adds the DNS rules' name matching (three rules
// that do not match).
func BenchmarkCacheHitRouter(b *testing.B) {
	r := cachedForBench(b)
	var rules []Rule
	for _, s := range []string{"cn", "example.org", "ads.net"} {
		n, _ := route.CompileNames(spec.Rule{DomainSuffix: []string{s}})
		rules = append(rules, Rule{Names: n, Action: BlockNXDomain})
	}
	rt := NewRouter(r, rules)
	ctx := context.Background()
	buf := make([]netip.Addr, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		if ips, _, err := rt.AppendIP(ctx, buf[:0], "a.test"); err != nil || len(ips) != 2 {
			b.Fatal(ips, err)
		}
	}
}

// BenchmarkCacheHitExchange is a query of the DNS service answered from
// the cache (a copy of the message with its TTLs aged).
func BenchmarkCacheHitExchange(b *testing.B) {
	r := cachedForBench(b)
	ctx := context.Background()
	q := question("a.test", mdns.TypeA)
	b.ReportAllocs()
	for b.Loop() {
		if resp, err := r.Exchange(ctx, q); err != nil || len(resp.Answer) != 1 {
			b.Fatal(resp, err)
		}
	}
}
