package route

import (
	"net/netip"
	"testing"

	"switchyard/netx"
	"switchyard/spec"
)

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestRuleKeys(t *testing.T) {
	base := netx.Flow{Network: netx.TCP, Dst: netx.Addr{IP: ip("10.1.2.3"), Port: 443}, Src: netip.MustParseAddrPort("192.168.1.7:5000"), Inbound: "in", User: "u"}
	named := base
	named.Dst = netx.DomainAddr("www.Google.com", 443)
	sniffed := base
	sniffed.Sniffed = "api7.example.org"
	sniffed.Protocol = "tls"
	udp := base
	udp.Network = netx.UDP
	cases := []struct {
		name string
		rule spec.Rule
		yes  []netx.Flow
		no   []netx.Flow
	}{
		{"empty matches all", spec.Rule{}, []netx.Flow{base, udp}, nil},
		{"inbound", spec.Rule{Inbound: []string{"other", "in"}}, []netx.Flow{base}, []netx.Flow{{Inbound: "x"}}},
		{"network", spec.Rule{Network: "udp"}, []netx.Flow{udp}, []netx.Flow{base}},
		{"domain exact", spec.Rule{Domain: []string{"www.google.com"}}, []netx.Flow{named}, []netx.Flow{base, sniffed}},
		{"domain suffix", spec.Rule{DomainSuffix: []string{"google.com"}}, []netx.Flow{named}, []netx.Flow{{Dst: netx.DomainAddr("notgoogle.com", 1)}}},
		{"suffix via sniffing", spec.Rule{DomainSuffix: []string{"example.org"}}, []netx.Flow{sniffed}, []netx.Flow{base}},
		{"keyword", spec.Rule{DomainKeyword: []string{"goog"}}, []netx.Flow{named}, []netx.Flow{sniffed}},
		{"regex", spec.Rule{DomainRegex: []string{`^api[0-9]+\.`}}, []netx.Flow{sniffed}, []netx.Flow{named}},
		{"ip cidr", spec.Rule{IPCIDR: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, []netx.Flow{base}, []netx.Flow{named}},
		{"source cidr", spec.Rule{SourceIPCIDR: []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}}, []netx.Flow{base}, []netx.Flow{{Src: netip.MustParseAddrPort("10.0.0.1:1")}}},
		{"port", spec.Rule{Port: []uint16{80, 443}}, []netx.Flow{base}, []netx.Flow{{Dst: netx.DomainAddr("a", 8080)}}},
		{"port range", spec.Rule{PortRange: []spec.PortRange{{Lo: 400, Hi: 500}}}, []netx.Flow{base}, []netx.Flow{{Dst: netx.DomainAddr("a", 501)}}},
		{"user", spec.Rule{User: []string{"u"}}, []netx.Flow{base}, []netx.Flow{{}}},
		{"protocol", spec.Rule{Protocol: []string{"tls"}}, []netx.Flow{sniffed}, []netx.Flow{base}},
		{"AND of keys", spec.Rule{Network: "tcp", Port: []uint16{443}, DomainSuffix: []string{"google.com"}}, []netx.Flow{named}, []netx.Flow{base}},
		{"one suffix, name in capitals with a final dot", spec.Rule{DomainSuffix: []string{".Google.com"}}, []netx.Flow{named, {Dst: netx.DomainAddr("GOOGLE.COM.", 1)}}, []netx.Flow{{Dst: netx.DomainAddr("oogle.com", 1)}}},
		{"one exact domain via sniffing", spec.Rule{Domain: []string{"API7.example.org"}}, []netx.Flow{sniffed}, []netx.Flow{named}},
		{"domain keys together", spec.Rule{Domain: []string{"x.org"}, DomainSuffix: []string{"google.com"}, DomainKeyword: []string{"api7"}},
			[]netx.Flow{named, sniffed, {Dst: netx.DomainAddr("x.org", 1)}}, []netx.Flow{base, {Dst: netx.DomainAddr("y.x.org", 1)}}},
		{"many exact domains", spec.Rule{Domain: []string{"a", "b", "c", "d", "e", "f", "g", "h", "www.google.com", "j"}}, []netx.Flow{named}, []netx.Flow{sniffed}},
		{"many inbounds", spec.Rule{Inbound: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "in"}}, []netx.Flow{base}, []netx.Flow{{Inbound: "x"}}},
		{"ip cidrs", spec.Rule{IPCIDR: []netip.Prefix{netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("10.1.0.0/16")}}, []netx.Flow{base}, []netx.Flow{named, {Dst: netx.Addr{IP: ip("10.2.0.1")}}}},
		{"ports and a range", spec.Rule{Port: []uint16{80}, PortRange: []spec.PortRange{{Lo: 440, Hi: 450}}}, []netx.Flow{base, {Dst: netx.DomainAddr("a", 80)}}, []netx.Flow{{Dst: netx.DomainAddr("a", 451)}}},
		{"many ports", spec.Rule{Port: []uint16{1, 2, 3, 4, 5, 6, 7, 8, 9, 443}}, []netx.Flow{base}, []netx.Flow{{Dst: netx.DomainAddr("a", 10)}}},
		{"one user, none given", spec.Rule{User: []string{""}}, nil, []netx.Flow{{}}},
	}
	for _, c := range cases {
		r, err := Compile(c.rule)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		for _, f := range c.yes {
			if !r.Match(&f) {
				t.Errorf("%s: %+v did not match", c.name, f)
			}
		}
		for _, f := range c.no {
			if r.Match(&f) {
				t.Errorf("%s: %+v matched", c.name, f)
			}
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	r, _ := Compile(spec.Rule{Network: "tcp", DomainSuffix: []string{"a.com", "b.com", "google.com"}, Port: []uint16{443}})
	f := netx.Flow{Dst: netx.DomainAddr("www.google.com", 443)}
	b.ReportAllocs()
	for b.Loop() {
		if !r.Match(&f) {
			b.Fatal("no match")
		}
	}
}
