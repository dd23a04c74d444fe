package dns

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"

	mdns "github.com/miekg/dns"

	"switchyard/route"
	"switchyard/spec"
)

func names(t *testing.T, r spec.Rule) route.Names {
	t.Helper()
	n, err := route.CompileNames(r)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestRouter(t *testing.T) {
	zdef, zcn := newZone(), newZone()
	def := newResolver(t, Options{}, "udp://"+startUDP(t, zdef).String())
	cn := newResolver(t, Options{}, "udp://"+startUDP(t, zcn).String())
	rt := NewRouter(def, []Rule{
		{Names: names(t, spec.Rule{DomainSuffix: []string{"cn"}}), Resolver: cn},
		{Names: names(t, spec.Rule{Domain: []string{"ads.test"}, DomainKeyword: []string{"tracker"}}), Action: BlockNXDomain},
		{Names: names(t, spec.Rule{DomainRegex: []string{`^empty\.`}}), Action: BlockEmpty},
		{Names: names(t, spec.Rule{DomainSuffix: []string{"example.cn"}}), Action: BlockNXDomain}, // after the cn rule: never reached
	})
	ctx := ctxT(t)

	if ips, err := rt.LookupIP(ctx, "www.Example.CN."); err != nil || !slices.Equal(ips, addrs("192.0.2.9")) {
		t.Fatalf("www.example.cn: %v, %v", ips, err)
	}
	if zcn.count("www.example.cn.", mdns.TypeA) != 1 || zdef.total() != 0 {
		t.Error("a .cn name was not asked of the cn resolver")
	}
	if _, err := rt.LookupIP(ctx, "a.test"); err != nil || zdef.count("a.test.", mdns.TypeA) != 1 {
		t.Errorf("the default resolver: %v", err)
	}

	for _, name := range []string{"ads.test", "my-tracker.net", "empty.test"} {
		_, _, err := rt.LookupIPTTL(ctx, name)
		if !errors.Is(err, ErrBlocked) {
			t.Errorf("%s: %v", name, err)
		}
	}

	q := question("ADS.test", mdns.TypeA)
	q.Id = 7
	resp, err := rt.Exchange(ctx, q)
	if err != nil || resp.Rcode != mdns.RcodeNameError || resp.Id != 7 || len(resp.Answer) != 0 || resp.Question[0].Name != "ADS.test." {
		t.Fatalf("blocked nxdomain: %v, %v", resp, err)
	}
	q = question("empty.test", mdns.TypeAAAA)
	q.SetEdns0(1232, true)
	resp, err = rt.Exchange(ctx, q)
	if err != nil || resp.Rcode != mdns.RcodeSuccess || len(resp.Answer) != 0 || resp.IsEdns0() == nil || !resp.IsEdns0().Do() {
		t.Fatalf("blocked empty: %v, %v", resp, err)
	}
	if zdef.total()+zcn.total() != 4 { // A and AAAA of www.example.cn and of a.test
		t.Error("a blocked name reached a server")
	}
	if res, act := rt.Pick("x.example.cn"); res != cn || act != Forward {
		t.Errorf("Pick = %v, %v: the first match wins", res, act)
	}
	// An IP literal is no name: the default resolver returns it.
	if ips, err := rt.LookupIP(ctx, "10.0.0.1"); err != nil || len(ips) != 1 {
		t.Errorf("literal: %v, %v", ips, err)
	}
}

func TestRouterHitAllocations(t *testing.T) {
	z := newZone()
	r, _ := cached(t, z, Options{})
	ctx := context.Background()
	rt := NewRouter(r, []Rule{{Names: names(t, spec.Rule{DomainSuffix: []string{"cn"}}), Action: BlockNXDomain}})
	if _, err := rt.LookupIP(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
	buf := make([]netip.Addr, 0, 8)
	if n := testing.AllocsPerRun(100, func() { rt.AppendIP(ctx, buf[:0], "a.test") }); n != 0 {
		t.Errorf("Router.AppendIP hit: %v allocations", n)
	}
}
