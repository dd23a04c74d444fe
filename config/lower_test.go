package config

import (
	"errors"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"switchyard/spec"
)

func mustParse(t *testing.T, text string) *spec.Spec {
	t.Helper()
	s, err := Parse([]byte(text), "sy.toml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return s
}

func implicitDirect() spec.Outbound {
	return spec.Outbound{Tag: "direct", Type: "direct", AddressFamily: "auto", UDP: true}
}

func implicitBlock() spec.Outbound {
	return spec.Outbound{Tag: "block", Type: "block", UDP: true}
}

func TestEmptyFileGetsDefaults(t *testing.T) {
	got := mustParse(t, "# nothing\n")
	want := &spec.Spec{
		Log:       spec.Log{Level: "info", Format: "text"},
		Dial:      spec.Dial{ConnectTimeout: 10 * time.Second, MaxConcurrentDials: 64},
		Reload:    spec.Reload{Drain: spec.DrainKeep},
		Outbounds: []spec.Outbound{implicitDirect(), implicitBlock()},
		Route:     spec.Route{Final: "direct"},
	}
	if !spec.Equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got.Inbounds != nil || got.Rules != nil || got.Socket.BindAddresses != nil {
		t.Fatalf("empty parts must be nil: %+v", got)
	}
}

func TestEmbeddedDefault(t *testing.T) {
	got, err := Parse(Default(), "default.toml")
	if err != nil {
		t.Fatalf("the embedded default does not parse: %v", err)
	}
	want := &spec.Spec{
		Log:    spec.Log{Level: "info", Format: "text"},
		Dial:   spec.Dial{ConnectTimeout: 10 * time.Second, MaxConcurrentDials: 64},
		Reload: spec.Reload{Drain: spec.DrainKeep},
		Inbounds: []spec.Inbound{{
			Tag: "mixed-in", Type: "mixed",
			Listen: netip.MustParseAddrPort("127.0.0.1:7890"), UDP: true,
		}},
		Outbounds: []spec.Outbound{implicitDirect(), implicitBlock()},
		Route:     spec.Route{Final: "direct"},
	}
	if !spec.Equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	// Callers may not change the embedded text.
	Default()[0] = 'X'
	if Default()[0] == 'X' {
		t.Fatal("Default returned the embedded slice itself")
	}
}

func TestFullFile(t *testing.T) {
	got, err := Load(filepath.Join("testdata", "full.toml"))
	if err != nil {
		t.Fatal(err)
	}
	p := netip.MustParsePrefix
	want := &spec.Spec{
		Log: spec.Log{Level: "debug", Format: "json"},
		Socket: spec.Socket{
			Mark: 255, Interface: "eth0",
			BindAddresses:    []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")},
			TCPKeepAliveIdle: 45 * time.Second,
		},
		Dial:   spec.Dial{ConnectTimeout: 3 * time.Second, MaxConcurrentDials: 16},
		Reload: spec.Reload{Drain: spec.DrainClose},
		Inbounds: []spec.Inbound{
			{Tag: "socks-in", Type: "socks", Listen: netip.MustParseAddrPort("127.0.0.1:1080"), UDP: true,
				Users: []spec.User{{Username: "Alice", Password: "secret"}, {Username: "bob"}}},
			{Tag: "http-in", Type: "http", Listen: netip.MustParseAddrPort("[::1]:8080"), Sniff: true},
			{Tag: "mixed-in", Type: "mixed", Listen: netip.MustParseAddrPort("0.0.0.0:7890")},
		},
		Outbounds: []spec.Outbound{
			{Tag: "out-v4", Type: "direct", AddressFamily: "prefer_ipv4", Drain: spec.DrainKeep, UDP: true},
			{Tag: "reject", Type: "block"},
			implicitDirect(),
			implicitBlock(),
		},
		Route: spec.Route{Final: "out-v4"},
		Rules: []spec.Rule{
			{
				Inbound:       []string{"socks-in", "mixed-in"},
				Network:       "udp",
				Domain:        []string{"example.com"},
				DomainSuffix:  []string{"google.com", "gstatic.com"},
				DomainKeyword: []string{"ads"},
				DomainRegex:   []string{`^api[0-9]+\.`},
				IPCIDR:        []netip.Prefix{p("10.0.0.0/8"), p("fd00::/8"), p("192.0.2.1/32"), p("198.51.100.0/24")},
				SourceIPCIDR:  []netip.Prefix{p("2001:db8::1/128")},
				Port:          []uint16{53, 443},
				PortRange:     []spec.PortRange{{Lo: 1000, Hi: 2000}, {Lo: 0, Hi: 65535}},
				User:          []string{"Alice"},
				Protocol:      []string{"tls", "quic"},
				Outbound:      "reject",
			},
			{Outbound: "block"},
		},
	}
	if !spec.Equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestInboundUDPDefaults(t *testing.T) {
	s := mustParse(t, `
[[inbounds]]
tag = "s"
type = "socks"
listen = "127.0.0.1:1"
[[inbounds]]
tag = "h"
type = "http"
listen = "127.0.0.1:2"
[[inbounds]]
tag = "m"
type = "mixed"
listen = "127.0.0.1:3"
[[inbounds]]
tag = "h-off"
type = "http"
listen = "127.0.0.1:4"
udp = false
`)
	want := map[string]bool{"s": true, "h": false, "m": true, "h-off": false}
	for _, in := range s.Inbounds {
		if in.UDP != want[in.Tag] {
			t.Errorf("inbound %s: UDP = %v, want %v", in.Tag, in.UDP, want[in.Tag])
		}
	}
}

func TestOutboundAliasesAndImplicit(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "out"
type = "freedom"
[[outbounds]]
tag = "deny"
type = "blackhole"
drain = "close"
`)
	want := []spec.Outbound{
		{Tag: "out", Type: "direct", AddressFamily: "auto", UDP: true},
		{Tag: "deny", Type: "block", Drain: spec.DrainClose, UDP: true},
		implicitDirect(),
		implicitBlock(),
	}
	if !spec.Equal(s.Outbounds, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Outbounds, want)
	}
}

func TestDeclaredDirectIsKept(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "block"
type = "direct"
[[outbounds]]
tag = "direct"
type = "direct"
address_family = "ipv6_only"
udp = false
`)
	want := []spec.Outbound{
		{Tag: "block", Type: "direct", AddressFamily: "auto", UDP: true},
		{Tag: "direct", Type: "direct", AddressFamily: "ipv6_only"},
	}
	if !spec.Equal(s.Outbounds, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Outbounds, want)
	}

	s = mustParse(t, "[[outbounds]]\ntag = \"direct\"\ntype = \"freedom\"\naddress_family = \"ipv4_only\"\n")
	want = []spec.Outbound{{Tag: "direct", Type: "direct", AddressFamily: "ipv4_only", UDP: true}, implicitBlock()}
	if !spec.Equal(s.Outbounds, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Outbounds, want)
	}
}

func TestRuleLowering(t *testing.T) {
	s := mustParse(t, `
[[rules]]
domain_suffix = ["..x.org", ".EXAMPLE.net"]
ip_cidr = ["::ffff:10.0.0.0/104", "::ffff:0:0/96", "::ffff:0:0/80", "fe80::1"]
port = []
outbound = "direct"
[[rules]]
outbound = "block"
`)
	p := netip.MustParsePrefix
	want := []spec.Rule{
		{
			DomainSuffix: []string{".x.org", "example.net"},
			IPCIDR:       []netip.Prefix{p("10.0.0.0/8"), p("0.0.0.0/0"), p("::/80"), p("fe80::1/128")},
			Outbound:     "direct",
		},
		{Outbound: "block"},
	}
	if !spec.Equal(s.Rules, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Rules, want)
	}
}

func TestEqualAcrossLoads(t *testing.T) {
	const base = `
[[inbounds]]
tag = "in"
type = "socks"
listen = "127.0.0.1:1080"
[[outbounds]]
tag = "a"
type = "direct"
[[outbounds]]
tag = "b"
type = "direct"
[[rules]]
port = [443]
outbound = "a"
`
	one, two := mustParse(t, base), mustParse(t, base)
	if !spec.Equal(one, two) {
		t.Fatal("two loads of the same text differ")
	}
	changed := mustParse(t, strings.Replace(base, "tag = \"b\"\ntype = \"direct\"", "tag = \"b\"\ntype = \"direct\"\nudp = false", 1))
	if spec.Equal(one, changed) {
		t.Fatal("changing an outbound left the spec equal")
	}
	if !spec.Equal(one.Outbounds[0], changed.Outbounds[0]) || spec.Equal(one.Outbounds[1], changed.Outbounds[1]) {
		t.Fatalf("only outbound b should differ: %+v vs %+v", one.Outbounds, changed.Outbounds)
	}
	for i := 2; i < len(one.Outbounds); i++ {
		if !spec.Equal(one.Outbounds[i], changed.Outbounds[i]) {
			t.Errorf("outbound %d changed", i)
		}
	}
	if !spec.Equal(one.Inbounds, changed.Inbounds) || !spec.Equal(one.Rules, changed.Rules) ||
		!spec.Equal(one.Route, changed.Route) || !spec.Equal(one.Dial, changed.Dial) ||
		!spec.Equal(one.Socket, changed.Socket) || !spec.Equal(one.Log, changed.Log) {
		t.Fatal("a part other than the outbounds changed")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sy.toml")
	if err := os.WriteFile(path, []byte("[log]\nlevel = \"loud\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || err.Error() != path+`:2: log.level: "loud" is not one of trace | debug | info | warn | error` {
		t.Fatalf("Load error = %v", err)
	}
	_, err = Load(filepath.Join(dir, "missing.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
}

// lowerWith lowers text as Parse does, with outbounds of the given canonical
// types (tag -> type) declared beside the file's own. The loader accepts no
// outbound type a balancer member may have yet, so a balancer that lowers
// without a problem can only be built this way.
func lowerWith(t *testing.T, text string, declared map[string]string) (*spec.Spec, []*Error) {
	t.Helper()
	ix := buildIndex([]byte(text))
	var f fileConfig
	unknown, fatal := decode([]byte(text), &f, ix)
	if fatal != nil || len(unknown) > 0 {
		t.Fatalf("decode: %v %v", fatal, unknown)
	}
	l := newLowerer(ix)
	for tag, typ := range declared {
		l.outboundTags[tag] = "outbounds"
		l.declaredTypes[tag] = typ
	}
	return l.lower(&f), l.errs
}

func TestBalancerLowering(t *testing.T) {
	s, errs := lowerWith(t, `
[[balancers]]
tag = "pool"
members = ["ss", "trojan"]
[[balancers]]
tag = "rr"
members = ["vmess", "socks", "http", "vless", "ss"]
strategy = "round_robin"
probe_interval = "1m30s"
probe_timeout = "2s"
[[balancers]]
tag = "fo"
members = ["vless"]
strategy = "failover"
[[rules]]
port = [443]
outbound = "rr"
[route]
final = "pool"
`, map[string]string{
		"ss": "shadowsocks", "trojan": "trojan", "vless": "vless",
		"vmess": "vmess", "socks": "socks", "http": "http",
	})
	if len(errs) > 0 {
		t.Fatalf("problems: %v", Errors(errs))
	}
	want := []spec.Balancer{
		{Tag: "pool", Members: []string{"ss", "trojan"}, Strategy: "failover",
			ProbeInterval: 30 * time.Second, ProbeTimeout: 5 * time.Second},
		{Tag: "rr", Members: []string{"vmess", "socks", "http", "vless", "ss"}, Strategy: "round_robin",
			ProbeInterval: 90 * time.Second, ProbeTimeout: 2 * time.Second},
		{Tag: "fo", Members: []string{"vless"}, Strategy: "failover",
			ProbeInterval: 30 * time.Second, ProbeTimeout: 5 * time.Second},
	}
	if !spec.Equal(s.Balancers, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Balancers, want)
	}
	if s.Route.Final != "pool" || len(s.Rules) != 1 || s.Rules[0].Outbound != "rr" {
		t.Fatalf("route %+v, rules %+v", s.Route, s.Rules)
	}
}

func TestBalancerMemberTypes(t *testing.T) {
	declared := map[string]string{"hy2": "hysteria2", "wg": "wireguard", "d": "direct", "ss": "shadowsocks"}
	_, errs := lowerWith(t, `
[[balancers]]
tag = "pool"
members = ["ss", "hy2", "wg", "d"]
`, declared)
	var got []string
	for _, e := range errs {
		got = append(got, e.Key+": "+e.Msg)
	}
	want := []string{
		"balancers[0].members[1]: balancer pool: outbound hy2 has no upstream a TCP health probe can reach",
		"balancers[0].members[2]: balancer pool: outbound wg has no upstream a TCP health probe can reach",
		"balancers[0].members[3]: balancer pool: outbound d has no upstream a TCP health probe can reach",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}
