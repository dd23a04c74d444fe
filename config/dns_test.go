package config

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"switchyard/spec"
)

// defaultDNS is [dns] with every default.
func defaultDNS() *spec.DNS {
	return &spec.DNS{
		Servers:   []string{"system"},
		Bootstrap: "system",
		CacheSize: 4096,
		MaxTTL:    24 * time.Hour,
		Timeout:   5 * time.Second,
	}
}

func TestDNSOmittedIsNil(t *testing.T) {
	if s := mustParse(t, "[log]\nlevel = \"info\"\n"); s.DNS != nil {
		t.Fatalf("no [dns] lowered to %+v", s.DNS)
	}
	s, _, err := Parse(Default(), "default.toml")
	if err != nil || s.DNS != nil {
		t.Fatalf("the embedded default has a [dns]: %+v, %v", s.DNS, err)
	}
}

func TestDNSDefaults(t *testing.T) {
	for _, text := range []string{"[dns]\n", "dns = {}\n", "[dns]\nserve = false\n"} {
		if got := mustParse(t, text).DNS; !spec.Equal(got, defaultDNS()) {
			t.Errorf("%q:\n got  %+v\n want %+v", text, got, defaultDNS())
		}
	}
}

func TestDNSKeys(t *testing.T) {
	s := mustParse(t, `[dns]
servers = ["udp://1.1.1.1", "https://dns.google"]
serve = true
bootstrap = "tcp://[2001:db8::53]:5353"
cache_size = 100
min_ttl = "1m"
max_ttl = "1h"
timeout = "2s"
`)
	want := &spec.DNS{
		Servers:   []string{"udp://1.1.1.1:53", "https://dns.google/dns-query"},
		Serve:     true,
		Bootstrap: "tcp://[2001:db8::53]:5353",
		CacheSize: 100,
		MinTTL:    time.Minute,
		MaxTTL:    time.Hour,
		Timeout:   2 * time.Second,
	}
	if !spec.Equal(s.DNS, want) {
		t.Fatalf("got  %+v\nwant %+v", s.DNS, want)
	}

	s = mustParse(t, `[dns]
pre_proxy = ["udp://223.5.5.5:53", "system"]
through_proxy = ["tls://dns.example"]
bootstrap = "udp://223.5.5.5"
cache_size = 1000000
min_ttl = "24h"
`)
	want = &spec.DNS{
		PreProxy:     []string{"udp://223.5.5.5:53", "system"},
		ThroughProxy: []string{"tls://dns.example:853"},
		Bootstrap:    "udp://223.5.5.5:53",
		CacheSize:    1_000_000,
		MinTTL:       24 * time.Hour, // equal to max_ttl is allowed
		MaxTTL:       24 * time.Hour,
		Timeout:      5 * time.Second,
	}
	if !spec.Equal(s.DNS, want) {
		t.Fatalf("got  %+v\nwant %+v", s.DNS, want)
	}
}

// Server URLs are lowered to one form, so that two ways of writing one
// server compare equal across reloads.
func TestDNSServerURLForms(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"system", "system"},
		{"udp://1.1.1.1", "udp://1.1.1.1:53"},
		{"UDP://1.1.1.1:5353", "udp://1.1.1.1:5353"},
		{"tcp://[2001:DB8::1]", "tcp://[2001:db8::1]:53"},
		{"tcp://[::ffff:192.0.2.1]:53", "tcp://192.0.2.1:53"},
		{"tls://Dns.Google", "tls://dns.google:853"},
		{"tls://1.1.1.1:8853", "tls://1.1.1.1:8853"},
		{"tls://_dns.resolver.arpa.", "tls://_dns.resolver.arpa.:853"},
		{"https://dns.google", "https://dns.google/dns-query"},
		{"https://dns.google:443/resolve", "https://dns.google/resolve"},
		{"https://[2001:db8::1]:8443/", "https://[2001:db8::1]:8443/"},
		{"https://[2001:db8::1]", "https://[2001:db8::1]/dns-query"},
		{"https://doh.example/a/B", "https://doh.example/a/B"},
	} {
		s := mustParse(t, "[dns]\nservers = ["+quote(tc.in)+"]\n")
		if got := s.DNS.Servers; len(got) != 1 || got[0] != tc.want {
			t.Errorf("%q lowered to %q, want %q", tc.in, got, tc.want)
		}
	}
}

func quote(s string) string { return `"` + s + `"` }

func TestDNSRules(t *testing.T) {
	s := mustParse(t, `[dns]
servers = ["udp://1.1.1.1"]
[[dns.rules]]
domain = ["Router.LAN."]
domain_suffix = [".CN", "example.com."]
domain_keyword = ["Ads"]
domain_regex = ['^api[0-9]+\.']
servers = ["udp://223.5.5.5", "tcp://223.5.5.5"]
[[dns.rules]]
domain_keyword = ["tracker"]
action = "block"
[[dns.rules]]
domain_suffix = ["ads.example"]
action = "block"
block_with = "empty"
[[dns.rules]]
domain = ["x.example"]
action = "block"
block_with = "nxdomain"
`)
	want := []spec.DNSRule{
		{
			Domain:        []string{"router.lan"},
			DomainSuffix:  []string{"cn", "example.com"},
			DomainKeyword: []string{"ads"},
			DomainRegex:   []string{`^api[0-9]+\.`},
			Servers:       []string{"udp://223.5.5.5:53", "tcp://223.5.5.5:53"},
		},
		{DomainKeyword: []string{"tracker"}, Action: "block", BlockWith: "nxdomain"},
		{DomainSuffix: []string{"ads.example"}, Action: "block", BlockWith: "empty"},
		{Domain: []string{"x.example"}, Action: "block", BlockWith: "nxdomain"},
	}
	if !spec.Equal(s.DNS.Rules, want) {
		t.Fatalf("got  %+v\nwant %+v", s.DNS.Rules, want)
	}
	if s.DNS.FakeIP != nil {
		t.Fatalf("no [dns.fakeip] lowered to %+v", s.DNS.FakeIP)
	}
}

func TestFakeIP(t *testing.T) {
	p := netip.MustParsePrefix
	tests := []struct {
		name, text string
		want       spec.FakeIP
	}{
		{"both ranges", `ipv4 = "198.18.0.1/15"
ipv6 = "FC00::/18"
fake_ip_filter = [".LAN", "local.", "Example.COM."]
`, spec.FakeIP{IPv4: p("198.18.0.0/15"), IPv6: p("fc00::/18"), Filter: []string{"lan", "local", "example.com"}, Size: 65536}},
		{"the default size is what a small range holds", `ipv4 = "198.18.0.0/30"
ipv6 = "fc00::/64"
`, spec.FakeIP{IPv4: p("198.18.0.0/30"), IPv6: p("fc00::/64"), Size: 4}},
		{"IPv6 only", `ipv6 = "fc00::/120"
`, spec.FakeIP{IPv6: p("fc00::/120"), Size: 256}},
		{"an IPv4-mapped prefix is IPv4", `ipv4 = "::ffff:198.18.0.0/111"
size = 131072
`, spec.FakeIP{IPv4: p("198.18.0.0/15"), Size: 131072}},
		{"ranges larger than the bound", `ipv4 = "10.0.0.0/8"
ipv6 = "fc00::/108"
size = 1000000
`, spec.FakeIP{IPv4: p("10.0.0.0/8"), IPv6: p("fc00::/108"), Size: 1_000_000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := mustParse(t, "[dns]\nserve = true\n[dns.fakeip]\n"+tc.text)
			if !spec.Equal(*s.DNS.FakeIP, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", *s.DNS.FakeIP, tc.want)
			}
		})
	}
}

func TestDNSOutbound(t *testing.T) {
	s := mustParse(t, `[dns]
serve = false
[dns.fakeip]
ipv4 = "198.18.0.0/15"
[[outbounds]]
tag = "dns-out"
type = "dns"
[[outbounds]]
tag = "dns-tcp"
type = "dns"
udp = false
drain = "close"
[[rules]]
protocol = ["dns"]
outbound = "dns-out"
[route]
final = "dns-tcp"
`)
	want := []spec.Outbound{
		{Tag: "dns-out", Type: "dns", UDP: true},
		{Tag: "dns-tcp", Type: "dns", Drain: spec.DrainClose},
		implicitDirect(),
		implicitBlock(),
	}
	if !spec.Equal(s.Outbounds, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Outbounds, want)
	}
	if s.Rules[0].Outbound != "dns-out" || s.Route.Final != "dns-tcp" {
		t.Fatalf("rules %+v, route %+v", s.Rules, s.Route)
	}
}

func TestDNSWarnings(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
	}{
		{"fake IPs that nothing hands out", `[dns]
serve = false
[dns.fakeip]
ipv4 = "198.18.0.0/15"
`, []string{"sy.toml:3: dns.fakeip: fake IPs are answers of the DNS service, and nothing asks it: set serve = true or route flows to a dns outbound"}},
		{"a bootstrap no server needs", `[dns]
servers = ["udp://1.1.1.1", "system"]
bootstrap = "udp://9.9.9.9"
[[dns.rules]]
domain = ["x"]
servers = ["tls://[2001:db8::1]"]
`, []string{"sy.toml:3: dns.bootstrap: no DNS server is given by name: bootstrap is not used"}},
		{"bootstrap for a rule's server by name", `[dns]
servers = ["udp://1.1.1.1"]
bootstrap = "udp://9.9.9.9"
[[dns.rules]]
domain = ["x"]
servers = ["tls://dns.example"]
`, nil},
		{"bootstrap for a split server by name", `[dns]
pre_proxy = ["udp://1.1.1.1"]
through_proxy = ["https://dns.example/q"]
bootstrap = "udp://9.9.9.9"
`, nil},
		{"system bootstrap written out", `[dns]
servers = ["udp://1.1.1.1"]
bootstrap = "system"
`, nil},
		{"fake IPs with serve", `[dns]
serve = true
fakeip.ipv6 = "fc00::/18"
`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, warns, err := Parse([]byte(tc.text), "sy.toml")
			if err != nil {
				t.Fatal(err)
			}
			if len(warns) != len(tc.want) {
				t.Fatalf("warnings %v, want %q", warns, tc.want)
			}
			for i, w := range warns {
				if w.Error() != tc.want[i] {
					t.Errorf("warning %d = %q, want %q", i, w, tc.want[i])
				}
			}
		})
	}
}

func TestDNSErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"server URLs", `[dns]
servers = [
  "ftp://x",
  "1.1.1.1",
  "System",
  "",
  "udp://",
  "udp://:53",
  "udp://1.1.1.1:0",
  "udp://1.1.1.1:x",
  "udp://1.1.1.1:",
  "udp://2001:db8::1",
  "udp://[1.2.3.4]",
  "udp://[fe80::1%eth0]",
  "udp://bad_host!",
  "udp://1.1.1.1/dns",
  "https://dns.example/q?x=1",
  "tls://dns.example#f",
  "https://user:secret@dns.example/",
  "udp://1.1.1.1",
  "udp://1.1.1.1:53",
  "udp://[2001:db8::1",
]
`, []want{
			{3, "dns.servers[0]", `"ftp://x" is not a DNS server URL (udp://, tcp://, tls://, https:// or system)`},
			{4, "dns.servers[1]", `"1.1.1.1" is not a DNS server URL`},
			{5, "dns.servers[2]", `"System" is not a DNS server URL`},
			{6, "dns.servers[3]", `"" is not a DNS server URL`},
			{7, "dns.servers[4]", `"udp://" has no host`},
			{8, "dns.servers[5]", `"udp://:53" has no host`},
			{9, "dns.servers[6]", `"udp://1.1.1.1:0": port 0 is not a server port`},
			{10, "dns.servers[7]", `"udp://1.1.1.1:x": the port must be a number from 1 to 65535`},
			{11, "dns.servers[8]", `"udp://1.1.1.1:": the port must be a number from 1 to 65535`},
			{12, "dns.servers[9]", `"udp://2001:db8::1": an IPv6 address goes in brackets, such as "udp://[2001:db8::1]"`},
			{13, "dns.servers[10]", `"udp://[1.2.3.4]": brackets hold an IPv6 address; write an IPv4 address without them`},
			{14, "dns.servers[11]", `"udp://[fe80::1%eth0]": zoned addresses are not supported`},
			{15, "dns.servers[12]", `"udp://bad_host!": "bad_host!" is neither an IP nor a host name`},
			{16, "dns.servers[13]", `"udp://1.1.1.1/dns": a udp:// server has no path`},
			{17, "dns.servers[14]", `"https://dns.example/q?x=1": a DNS server URL has no query or fragment`},
			{18, "dns.servers[15]", `"tls://dns.example#f": a DNS server URL has no query or fragment`},
			{19, "dns.servers[16]", `a DNS server URL has no user info (a name and "@" before the host)`},
			{21, "dns.servers[18]", `duplicate server "udp://1.1.1.1:53" (also dns.servers[17])`},
			{22, "dns.servers[19]", `"udp://[2001:db8::1": "[2001:db8::1" is neither an IP nor a host name`},
		}},

		{"servers and the split pair", `[dns]
servers = ["system"]
pre_proxy = ["system"]
through_proxy = ["system"]
`, []want{
			{3, "dns.pre_proxy", "servers (line 2) is one resolver for everything: give servers, or pre_proxy and through_proxy, not both"},
			{4, "dns.through_proxy", "servers (line 2) is one resolver for everything"},
		}},

		{"half of the pair", `[log]
level = "info"
[dns]
pre_proxy = ["udp://1.1.1.1"]
`, []want{{3, "dns.through_proxy", "required key is missing (pre_proxy on line 4 goes with it: they are a pair)"}}},

		{"the other half of the pair", `[dns]
serve = true
through_proxy = ["udp://1.1.1.1"]
`, []want{{1, "dns.pre_proxy", "required key is missing (through_proxy on line 3 goes with it: they are a pair)"}}},

		{"empty server lists", `[dns]
servers = []
`, []want{{2, "dns.servers", "must not be empty: give at least one server URL, or leave servers out for the system resolver"}}},

		{"empty halves of the pair", `[dns]
pre_proxy = []
through_proxy = ["system", "ftp://x"]
`, []want{
			{2, "dns.pre_proxy", `must not be empty: give at least one server URL ("system" for the OS resolver)`},
			{3, "dns.through_proxy[1]", `"ftp://x" is not a DNS server URL`},
		}},

		{"bootstrap", `[dns]
bootstrap = "tls://1.1.1.1"
[[dns.rules]]
domain = ["a"]
servers = ["system"]
`, []want{{2, "dns.bootstrap", `"tls://1.1.1.1" is not a bootstrap server: use "system" or a udp:// or tcp:// URL with an IP address`}}},

		{"bootstrap by name", `[dns]
bootstrap = "udp://dns.google"
`, []want{{2, "dns.bootstrap", `"udp://dns.google" names its host: a bootstrap server needs an IP address, since it resolves the names of the other servers`}}},

		{"bootstrap values", `dns.bootstrap = "1.1.1.1"
`, []want{{1, "dns.bootstrap", `"1.1.1.1" is not a bootstrap server`}}},

		{"bootstrap URL problems", `dns.bootstrap = "TCP://1.1.1.1:0"
`, []want{{1, "dns.bootstrap", `"TCP://1.1.1.1:0": port 0 is not a server port`}}},

		{"cache and timeouts", `[dns]
cache_size = 0
min_ttl = "-1s"
max_ttl = "0s"
timeout = "soon"
[[outbounds]]
tag = "x"
type = "direct"
dns.cache_size = 1
`, []want{
			{2, "dns.cache_size", "0 is out of range 1..1000000"},
			{3, "dns.min_ttl", `"-1s" must not be negative`},
			{4, "dns.max_ttl", `"0s" must be above zero`},
			{5, "dns.timeout", `"soon" is not a duration`},
			{9, "outbounds[0].dns", `unknown key "dns"`},
		}},

		{"serve is a boolean", `[dns]
servers = ["system"]
serve = "yes"
`, []want{{3, "dns.serve", "expected a boolean, found a string"}}},

		{"cache bound", `[dns]
cache_size = 1000001
timeout = "0s"
`, []want{
			{2, "dns.cache_size", "1000001 is out of range 1..1000000"},
			{3, "dns.timeout", `"0s" must be above zero`},
		}},

		{"min_ttl above max_ttl", `[dns]
min_ttl = "2h"
max_ttl = "1h"
`, []want{{2, "dns.min_ttl", `"2h" is above max_ttl (1h0m0s): a cached answer's TTL is raised to min_ttl and capped at max_ttl`}}},

		{"min_ttl above the default max_ttl", `[dns]
min_ttl = "25h"
`, []want{{2, "dns.min_ttl", `"25h" is above max_ttl (24h0m0s, the default)`}}},

		{"rule matchers", `[dns]
[[dns.rules]]
servers = ["system"]
[[dns.rules]]
domain = []
action = "block"
[[dns.rules]]
rule_set = ["geosite-cn"]
action = "block"
[[dns.rules]]
domain = ["", "ok"]
domain_suffix = ["."]
domain_keyword = [""]
domain_regex = ["("]
action = "block"
`, []want{
			{2, "dns.rules[0]", "a DNS rule needs at least one name to match: domain, domain_suffix, domain_keyword, domain_regex or rule_set"},
			{4, "dns.rules[1]", "a DNS rule needs at least one name to match"},
			{8, "dns.rules[2].rule_set[0]", `unknown rule set "geosite-cn" (no [[rule_sets]] is declared)`},
			{11, "dns.rules[3].domain[0]", "must not be empty"},
			{12, "dns.rules[3].domain_suffix[0]", "must not be empty"},
			{13, "dns.rules[3].domain_keyword[0]", "must not be empty"},
			{14, "dns.rules[3].domain_regex[0]", `bad regex "(": missing closing ): ` + "`(`"},
		}},

		{"rule answers", `[dns]
[[dns.rules]]
domain = ["a"]
[[dns.rules]]
domain = ["b"]
servers = []
[[dns.rules]]
domain = ["c"]
action = "block"
servers = ["system"]
[[dns.rules]]
domain = ["d"]
action = "reject"
servers = ["ftp://x"]
[[dns.rules]]
domain = ["e"]
action = "block"
block_with = "refused"
[[dns.rules]]
domain = ["f"]
servers = ["system", "system"]
block_with = "empty"
`, []want{
			{2, "dns.rules[0].servers", `required key is missing (or action = "block")`},
			{6, "dns.rules[1].servers", `must not be empty: give at least one server URL, or action = "block"`},
			{10, "dns.rules[2].servers", `a rule with action = "block" (line 9) asks no server: give servers or action = "block", not both`},
			{13, "dns.rules[3].action", `"reject" is not one of block`},
			{14, "dns.rules[3].servers[0]", `"ftp://x" is not a DNS server URL`},
			{18, "dns.rules[4].block_with", `"refused" is not one of nxdomain | empty`},
			{21, "dns.rules[5].servers[1]", `duplicate server "system" (also dns.rules[5].servers[0])`},
			{22, "dns.rules[5].block_with", `block_with goes with action = "block": a rule with servers answers what they answer`},
		}},

		{"fake IP ranges", `[dns]
serve = true
[dns.fakeip]
ipv4 = "fc00::/18"
ipv6 = "198.18.0.0/15"
`, []want{
			{4, "dns.fakeip.ipv4", `"fc00::/18" is not an IPv4 prefix (such as "198.18.0.0/15")`},
			{5, "dns.fakeip.ipv6", `"198.18.0.0/15" is not an IPv6 prefix (such as "fc00::/18")`},
		}},

		{"fake IP ranges too small or not prefixes", `[dns]
serve = true
[dns.fakeip]
ipv4 = "198.18.0.0/31"
ipv6 = "fc00::/127"
fake_ip_filter = ["lan", "", "."]
[[outbounds]]
tag = "d"
type = "dns"
[dns2]
`, []want{
			{4, "dns.fakeip.ipv4", `"198.18.0.0/31" is too small for fake IPs: the prefix length is at most 30 (4 addresses)`},
			{5, "dns.fakeip.ipv6", `"fc00::/127" is too small for fake IPs: the prefix length is at most 126 (4 addresses)`},
			{6, "dns.fakeip.fake_ip_filter[1]", "must not be empty"},
			{6, "dns.fakeip.fake_ip_filter[2]", "must not be empty"},
			{10, "dns2", `unknown key "dns2"`},
		}},

		{"wildcards", `[dns]
serve = true
fakeip.ipv4 = "198.18.0.0/15"
fakeip.fake_ip_filter = ["*.lan", "+.local", "a.*.b", "", "ok"]
[[dns.rules]]
domain = ["*.example"]
domain_suffix = ["*.cn"]
action = "block"
`, []want{
			{4, "dns.fakeip.fake_ip_filter[0]", `"*.lan": wildcards are not taken; a suffix matches the name and every name under it: write "lan"`},
			{4, "dns.fakeip.fake_ip_filter[1]", `"+.local": wildcards are not taken; a suffix matches the name and every name under it: write "local"`},
			{4, "dns.fakeip.fake_ip_filter[2]", `"a.*.b": wildcards are not taken; a suffix matches the name and every name under it`},
			{4, "dns.fakeip.fake_ip_filter[3]", "must not be empty"},
			{6, "dns.rules[0].domain[0]", `"*.example": wildcards are not taken; list the names themselves`},
			{7, "dns.rules[0].domain_suffix[0]", `"*.cn": wildcards are not taken; a suffix matches the name and every name under it: write "cn"`},
		}},

		{"fake IP range text", `dns.serve = true
dns.fakeip.ipv4 = "198.18.0.0"
dns.fakeip.ipv6 = "fc00::/200"
`, []want{
			{2, "dns.fakeip.ipv4", `"198.18.0.0" is too small for fake IPs`},
			{3, "dns.fakeip.ipv6", `"fc00::/200" is not an IPv6 prefix`},
		}},

		{"a fake IP table without ranges", `[dns]
serve = true
[dns.fakeip]
size = 10
`, []want{{3, "dns.fakeip", "a fake IP table needs ipv4 or ipv6 (or both): the ranges its addresses come from"}}},

		{"fake IP sizes", `[dns]
serve = true
[dns.fakeip]
ipv4 = "198.18.0.0/30"
ipv6 = "fc00::/64"
size = 5
`, []want{{6, "dns.fakeip.size", "5 is more than the 4 addresses of ipv4 (198.18.0.0/30)"}}},

		{"fake IP size bounds", `[dns]
serve = true
[dns.fakeip]
ipv6 = "fc00::/120"
size = 0
`, []want{{5, "dns.fakeip.size", "0 is out of range 1..1000000"}}},

		{"fake IP size above the bound", `[dns]
serve = true
[dns.fakeip]
ipv6 = "fc00::/18"
size = 1000001
`, []want{{5, "dns.fakeip.size", "1000001 is out of range 1..1000000"}}},

		{"fake IP size against the smaller range", `[dns]
serve = true
[dns.fakeip]
ipv4 = "10.0.0.0/8"
ipv6 = "fc00::/120"
size = 257
`, []want{{6, "dns.fakeip.size", "257 is more than the 256 addresses of ipv6 (fc00::/120)"}}},

		{"a dns outbound needs [dns]", `[[outbounds]]
tag = "dns-out"
type = "dns"
server = "1.1.1.1:53"
[[rules]]
port = [53]
outbound = "dns-out"
`, []want{
			{3, "outbounds[0].type", "a dns outbound answers with the resolvers of [dns], and this file has no [dns] table"},
			{4, "outbounds[0].server", "a dns outbound has no server"},
		}},

		{"a dns outbound is no balancer member", `[dns]
[[outbounds]]
tag = "dns-out"
type = "dns"
address_family = "auto"
[[balancers]]
tag = "pool"
members = ["dns-out"]
`, []want{
			{5, "outbounds[0].address_family", "a dns outbound has no address family"},
			{8, "balancers[0].members[0]", "balancer pool: outbound dns-out has no upstream a TCP health probe can reach"},
		}},

		{"unknown keys", `[dns]
server = ["udp://1.1.1.1"]
Serve = true
[[dns.rules]]
domain = ["a"]
action = "block"
outbound = "direct"
[dns.fakeip]
ipv4 = "198.18.0.0/15"
filter = ["lan"]
`, []want{
			{2, "dns.server", `unknown key "server"`},
			{3, "dns.Serve", `unknown key "Serve" (keys are case-sensitive: did you mean "serve"?)`},
			{7, "dns.rules[0].outbound", `unknown key "outbound"`},
			{10, "dns.fakeip.filter", `unknown key "filter"`},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.text, tc.want) })
	}
}

// A user info is a secret: its problem does not repeat it.
func TestDNSServerUserInfoIsNotRepeated(t *testing.T) {
	_, _, err := Parse([]byte("[dns]\nservers = [\"https://user:hunter2@dns.example/\"]\n"), "sy.toml")
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v", err)
	}
}
