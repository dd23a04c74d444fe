package dns

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"switchyard/netx"
	"switchyard/spec"
)

func buildSet(t *testing.T, s *spec.DNS, env Env) *Set {
	t.Helper()
	set, err := Build(s, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { set.Close() })
	return set
}

func TestBuildNil(t *testing.T) {
	set := buildSet(t, nil, Env{})
	ips, err := set.Servers().LookupIP(ctxT(t), "localhost")
	if err != nil || len(ips) == 0 {
		t.Fatalf("servers: %v, %v", ips, err)
	}
	if _, err := set.Destinations().LookupIP(ctxT(t), "localhost"); err != nil {
		t.Fatal(err)
	}
	resp, err := set.Exchanger().Exchange(ctxT(t), question("localhost", mdns.TypeA))
	if err != nil || len(resp.Answer) == 0 {
		t.Fatalf("exchange: %v, %v", resp, err)
	}
	st := set.Stats()
	if len(st) != 1 || st[0].Name != "servers" || st[0].Servers[0].URL != "system" || st[0].Queries != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestBuildSingle(t *testing.T) {
	z := newZone()
	a := startUDP(t, z)
	direct := &countingDialer{d: PolicyDialer(netx.NewDialer(netx.SocketPolicy{}, 0))}
	routed := &countingDialer{d: direct.d}
	set := buildSet(t, &spec.DNS{Servers: []string{"udp://" + a.String()}, Timeout: time.Second}, Env{Direct: direct, Routed: routed})
	set.Servers().LookupIP(ctxT(t), "a.test")
	set.Destinations().LookupIP(ctxT(t), "a.test")
	if z.count("a.test.", mdns.TypeA) != 1 {
		t.Error("servers and destinations do not share one resolver")
	}
	// One shared socket for the A and AAAA queries.
	if direct.count("udp") != 1 || routed.count("udp") != 0 {
		t.Errorf("direct %d, routed %d sockets", direct.count("udp"), routed.count("udp"))
	}
	if _, ok := set.Servers().(netx.TTLResolver); !ok {
		t.Error("servers is not a TTLResolver")
	}
	if _, ok := set.Destinations().(netx.TTLResolver); !ok {
		t.Error("destinations is not a TTLResolver")
	}
}

func TestBuildSplit(t *testing.T) {
	zpre, zthrough, zcn := newZone(), newZone(), newZone()
	pre, through, cn := startUDP(t, zpre), startUDP(t, zthrough), startUDP(t, zcn)
	direct := &countingDialer{d: PolicyDialer(netx.NewDialer(netx.SocketPolicy{}, 0))}
	routed := &countingDialer{d: direct.d}
	set := buildSet(t, &spec.DNS{
		PreProxy:     []string{"udp://" + pre.String()},
		ThroughProxy: []string{"udp://" + through.String()},
		Rules: []spec.DNSRule{
			{DomainSuffix: []string{"cn"}, Servers: []string{"udp://" + cn.String()}},
			{Domain: []string{"ads.test"}, Action: "block"},
			{DomainKeyword: []string{"pixel"}, Action: "block", BlockWith: "empty"},
			{DomainRegex: []string{`\.cn$`}, Servers: []string{"udp://" + cn.String()}}, // shares the first rule's resolver
		},
		Timeout: time.Second,
	}, Env{Direct: direct, Routed: routed})
	ctx := ctxT(t)

	if _, err := set.Servers().LookupIP(ctx, "a.test"); err != nil || zpre.count("a.test.", mdns.TypeA) != 1 {
		t.Fatalf("servers: %v", err)
	}
	if direct.count("udp") != 1 || routed.count("udp") != 0 {
		t.Errorf("pre_proxy went through direct %d, routed %d", direct.count("udp"), routed.count("udp"))
	}
	if _, err := set.Destinations().LookupIP(ctx, "a.test"); err != nil || zthrough.count("a.test.", mdns.TypeA) != 1 {
		t.Fatalf("destinations: %v", err)
	}
	if routed.count("udp") != 1 {
		t.Errorf("through_proxy went through routed %d", routed.count("udp"))
	}
	if _, err := set.Destinations().LookupIP(ctx, "x.cn"); err != nil || zcn.count("x.cn.", mdns.TypeA) != 1 || routed.count("udp") != 2 {
		t.Errorf("the cn rule: %v", err)
	}
	// Rules apply to destinations only.
	if _, err := set.Servers().LookupIP(ctx, "ads.test"); err != nil {
		t.Errorf("a block rule reached the servers' resolver: %v", err)
	}
	if _, err := set.Destinations().LookupIP(ctx, "ads.test"); !errors.Is(err, ErrBlocked) {
		t.Errorf("ads.test: %v", err)
	}
	resp, err := set.Exchanger().Exchange(ctx, question("ads.test", mdns.TypeA))
	if err != nil || resp.Rcode != mdns.RcodeNameError {
		t.Errorf("exchanger ads.test: %v, %v", resp, err)
	}
	resp, err = set.Exchanger().Exchange(ctx, question("a.pixel.test", mdns.TypeA))
	if err != nil || resp.Rcode != mdns.RcodeSuccess || len(resp.Answer) != 0 {
		t.Errorf("exchanger a.pixel.test: %v, %v", resp, err)
	}
	resp, err = set.Exchanger().Exchange(ctx, question("b.test", mdns.TypeA))
	if err != nil || zthrough.count("b.test.", mdns.TypeA) != 1 || len(resp.Answer) != 1 {
		t.Errorf("the exchanger does not ask through_proxy: %v, %v", resp, err)
	}

	var got []string
	for _, s := range set.Stats() {
		got = append(got, s.Name)
	}
	if !slices.Equal(got, []string{"pre_proxy", "through_proxy", "rule 1"}) {
		t.Errorf("resolvers %v", got)
	}
	set.Flush()
	set.Destinations().LookupIP(ctx, "a.test")
	if zthrough.count("a.test.", mdns.TypeA) != 2 {
		t.Error("Flush kept the answer")
	}
}

func TestBuildBootstrap(t *testing.T) {
	zboot, z := newZone(), newZone()
	boot := startUDP(t, zboot)
	a := startUDP(t, z)
	set := buildSet(t, &spec.DNS{
		Servers:   []string{"udp://dns.test:" + itoa(a.Port())},
		Bootstrap: "udp://" + boot.String(),
		Timeout:   time.Second,
	}, Env{})
	for _, name := range []string{"a.test", "b.test"} {
		if _, err := set.Destinations().LookupIP(ctxT(t), name); err != nil {
			t.Fatal(err)
		}
	}
	if zboot.count("dns.test.", mdns.TypeA) != 1 {
		t.Errorf("the bootstrap was asked %d times", zboot.count("dns.test.", mdns.TypeA))
	}
	if z.count("a.test.", mdns.TypeA) != 1 {
		t.Error("the server was not asked")
	}
	st := set.Stats()
	if len(st) != 2 || st[1].Name != "bootstrap" {
		t.Errorf("stats %+v", st)
	}
}

func TestBuildErrors(t *testing.T) {
	cases := []struct {
		s    spec.DNS
		want string
	}{
		{spec.DNS{Servers: []string{"udp://1.1.1.1", "udp://"}}, `dns.servers: dns server "udp://": missing host`},
		{spec.DNS{PreProxy: []string{"quic://x"}}, `dns.pre_proxy: dns server "quic://x"`},
		{spec.DNS{ThroughProxy: []string{"tcp://a b"}}, `dns.through_proxy: dns server "tcp://a b"`},
		{spec.DNS{Servers: []string{"system"}, PreProxy: []string{"system"}}, "exclusive"},
		{spec.DNS{Bootstrap: "udp://dns.google"}, `dns.bootstrap: "udp://dns.google": expected`},
		{spec.DNS{Bootstrap: "tls://1.1.1.1"}, `dns.bootstrap: "tls://1.1.1.1": expected`},
		{spec.DNS{Bootstrap: "udp:/1.1.1.1"}, `dns.bootstrap: dns server "udp:/1.1.1.1"`},
		{spec.DNS{Rules: []spec.DNSRule{{Servers: []string{"system"}}}}, "dns.rules[0]: a rule needs domain"},
		{spec.DNS{Rules: []spec.DNSRule{{Domain: []string{"a"}}}}, "dns.rules[0]: a rule needs servers"},
		{spec.DNS{Rules: []spec.DNSRule{{Domain: []string{"a"}, Action: "block"}, {Domain: []string{"a"}, Action: "drop"}}}, `dns.rules[1]: unknown action "drop"`},
		{spec.DNS{Rules: []spec.DNSRule{{Domain: []string{"a"}, Action: "block", BlockWith: "refused"}}}, `block_with "refused"`},
		{spec.DNS{Rules: []spec.DNSRule{{Domain: []string{"a"}, Action: "block", Servers: []string{"system"}}}}, "a block rule has no servers"},
		{spec.DNS{Rules: []spec.DNSRule{{DomainRegex: []string{"("}, Servers: []string{"system"}}}}, "dns.rules[0]: domain_regex"},
		{spec.DNS{Rules: []spec.DNSRule{{Domain: []string{"a"}, Servers: []string{"udp://x:99999"}}}}, `dns.rules[0].servers: dns server "udp://x:99999"`},
	}
	for _, c := range cases {
		set, err := Build(&c.s, Env{})
		if err == nil {
			set.Close()
			t.Errorf("%+v built", c.s)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.s, err, c.want)
		}
	}
	// A failed build closes what it made (the leak check at the end sees it).
	if _, err := Build(&spec.DNS{Bootstrap: "udp://127.0.0.1:1", Servers: []string{"udp://bad:"}}, Env{}); err == nil {
		t.Error("built")
	}
}
