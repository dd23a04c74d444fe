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
	s, warns, err := Parse([]byte(text), "sy.toml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if warns != nil {
		t.Fatalf("Parse warned: %v", warns)
	}
	return s
}

func implicitDirect() spec.Outbound {
	return spec.Outbound{Tag: "direct", Type: "direct", AddressFamily: "auto", UDP: true}
}

func implicitBlock() spec.Outbound {
	return spec.Outbound{Tag: "block", Type: "block", UDP: true}
}

// defaultHealth is [health] with every default.
func defaultHealth() spec.Health {
	return spec.Health{
		TCPCheckURLs:   []string{"https://www.gstatic.com/generate_204"},
		TCPCheckMethod: "HEAD",
		UDPCheckDNS:    []string{"1.1.1.1:53"},
		CheckInterval:  30 * time.Second,
		CheckTimeout:   5 * time.Second,
		IdleTimeout:    30 * time.Minute,
	}
}

func TestEmptyFileGetsDefaults(t *testing.T) {
	got := mustParse(t, "# nothing\n")
	want := &spec.Spec{
		Log:       spec.Log{Level: "info", Format: "text"},
		Dial:      spec.Dial{ConnectTimeout: 10 * time.Second, MaxConcurrentDials: 64},
		Reload:    spec.Reload{Drain: spec.DrainKeep},
		Outbounds: []spec.Outbound{implicitDirect(), implicitBlock()},
		Health:    defaultHealth(),
		Warmup:    spec.Warmup{Preconnect: spec.PreconnectAuto, SelectorPin: true},
		Route:     spec.Route{Final: "direct", Mode: "rule"},
	}
	if !spec.Equal(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
	if got.Inbounds != nil || got.Rules != nil || got.Socket.BindAddresses != nil || got.Groups != nil {
		t.Fatalf("empty parts must be nil: %+v", got)
	}
}

func TestEmbeddedDefault(t *testing.T) {
	got, _, err := Parse(Default(), "default.toml")
	if err != nil {
		t.Fatalf("the embedded default does not parse: %v", err)
	}
	want := &spec.Spec{
		Log:    spec.Log{Level: "info", Format: "text"},
		Dial:   spec.Dial{ConnectTimeout: 10 * time.Second, MaxConcurrentDials: 64},
		Reload: spec.Reload{Drain: spec.DrainKeep},
		Inbounds: []spec.Inbound{{
			Tag: "mixed-in", Type: "mixed",
			Listen: netip.MustParseAddrPort("127.0.0.1:7890"), UDP: true, MaxUDPAssociations: 1024,
			HandshakeTimeout: 10 * time.Second, MaxHandshakes: 256,
		}},
		Outbounds: []spec.Outbound{implicitDirect(), implicitBlock()},
		Health:    defaultHealth(),
		Warmup:    spec.Warmup{Preconnect: spec.PreconnectAuto, SelectorPin: true},
		API:       &spec.API{Listen: "127.0.0.1:9090"},
		Route:     spec.Route{Final: "direct", Mode: "rule"},
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
	got, warns, err := Load(filepath.Join("testdata", "full.toml"))
	if err != nil || warns != nil {
		t.Fatal(err, warns)
	}
	testdata, err := filepath.Abs("testdata")
	if err != nil {
		t.Fatal(err)
	}
	tcp := spec.Transport{Type: "tcp"}
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
				Users:            []spec.User{{Username: "Alice", Password: "secret"}, {Username: "bob", UpMbps: 8, DownMbps: 16}},
				HandshakeTimeout: 10 * time.Second, MaxHandshakes: 256, MaxUDPAssociations: 1024},
			{Tag: "http-in", Type: "http", Listen: netip.MustParseAddrPort("[::1]:8080"), Sniff: true,
				HandshakeTimeout: 5 * time.Second, MaxHandshakes: 32},
			{Tag: "mixed-in", Type: "mixed", Listen: netip.MustParseAddrPort("0.0.0.0:7890"),
				HandshakeTimeout: 10 * time.Second, MaxHandshakes: 256, MaxUDPAssociations: 64},
		},
		Outbounds: []spec.Outbound{
			{Tag: "out-v4", Type: "direct", AddressFamily: "prefer_ipv4", Drain: spec.DrainKeep, UDP: true},
			{Tag: "reject", Type: "block"},
			{Tag: "up-socks", Type: "socks", AddressFamily: "ipv4_only", Drain: spec.DrainClose,
				Server: "127.0.0.1:1081", Username: "su", Password: "sp", Transport: tcp,
				TLS: &spec.TLS{ServerName: "socks.example", ALPN: []string{"h2", "http/1.1"}, Insecure: true}},
			{Tag: "up-socks-2", Type: "socks", AddressFamily: "auto", UDP: true, Server: "[2001:db8::2]:1080", Transport: tcp},
			{Tag: "up-http", Type: "http", AddressFamily: "prefer_ipv6", Server: "proxy.example:3128",
				Username: "hu", Password: "hp", Transport: tcp,
				TLS: &spec.TLS{ServerName: "proxy.example", CAFile: filepath.Join(testdata, "certs", "ca.pem")}},
			{Tag: "ss", Type: "shadowsocks", AddressFamily: "auto", UDP: true, Server: "192.0.2.20:8388",
				Method:    "2022-blake3-aes-256-gcm",
				Password:  "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=:ZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXp7fH1+f4CBgoM=",
				Transport: tcp},
			{Tag: "trojan", Type: "trojan", AddressFamily: "auto", UDP: true, Server: "trojan.example:443",
				Password:  "secret",
				Transport: spec.Transport{Type: "httpupgrade", Path: "/up", Host: "up.example"},
				TLS:       &spec.TLS{ServerName: "cdn.example", ALPN: []string{"http/1.1"}, CAFile: filepath.Join(testdata, "ca.pem")}},
			{Tag: "vless", Type: "vless", AddressFamily: "auto", UDP: true, Server: "vless.example:443",
				UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", PacketEncoding: "xudp",
				Transport: spec.Transport{Type: "ws", Path: "/ray?x=1", Host: "ws.example",
					Headers:      map[string]string{"User-Agent": "switchyard", "X-Path": "a b"},
					MaxEarlyData: 2048, EarlyDataHeader: "X-Early"},
				TLS: &spec.TLS{ServerName: "vless.example", ALPN: []string{"http/1.1"}}},
			{Tag: "vmess", Type: "vmess", AddressFamily: "auto", UDP: true, Server: "vmess.example:10086",
				UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", Security: "chacha20-poly1305",
				PacketEncoding: "xudp",
				Transport:      spec.Transport{Type: "grpc", ServiceName: "Tun.Svc", Authority: "grpc.example", Mode: "multi"},
				TLS:            &spec.TLS{ServerName: "sni.example", ALPN: []string{"h2"}, Fingerprint: "firefox"}},
			{Tag: "hy2", Type: "hysteria2", AddressFamily: "prefer_ipv6", Drain: spec.DrainClose, Server: "hy2.example:8443",
				Password: "secret", Obfs: &spec.Obfs{Type: "salamander", Password: "obfs-secret"}, UpMbps: 50, DownMbps: 200, MaxConcurrentStreams: 1024,
				TLS: &spec.TLS{ServerName: "sni.example", ALPN: []string{"h3"}, Insecure: true}},
			{Tag: "wg", Type: "wireguard", AddressFamily: "ipv6_only", Drain: spec.DrainKeep,
				Endpoint: "203.0.113.1:51820", EndpointAddressFamily: "ipv4_only",
				PrivateKey: wgPrivate, PeerPublicKey: wgPeer, PresharedKey: wgPSK,
				Addresses: []netip.Prefix{p("10.7.0.2/32"), p("fd00:7::2/64")}, MTU: 1420, Keepalive: 25 * time.Second,
				AllowedIPs: []netip.Prefix{p("10.0.0.0/8"), p("fd00::/8")}, Reserved: []byte{1, 2, 3}},
			{Tag: "dns-out", Type: "dns", Drain: spec.DrainClose},
			implicitDirect(),
			implicitBlock(),
		},
		Balancers: []spec.Balancer{{Tag: "pool", Members: []string{"up-socks", "up-socks-2"}, Strategy: "round_robin",
			ProbeInterval: 10 * time.Second, ProbeTimeout: 2 * time.Second}},
		Groups: []spec.Group{
			{Tag: "proxy", Policy: "selector", Members: []string{"vless", "vmess", "auto", "pool"}, Default: "vmess",
				Final: "out-v4", IdleTimeout: 10 * time.Minute},
			{Tag: "auto", Policy: "urltest", Members: []string{"vless", "vmess", "hy2", "ss", "fb"}, Interrupt: true,
				Tolerance: 80 * time.Millisecond, CheckURL: "http://cp.example:8080/generate_204"},
			{Tag: "fb", Policy: "fallback", Members: []string{"vless", "ss"}, Final: "proxy"},
			{Tag: "lb", Policy: "loadbalance", Members: []string{"trojan", "wg", "direct"}, CheckURL: "https://lb.example/"},
		},
		DNS: &spec.DNS{
			PreProxy:     []string{"udp://223.5.5.5:53", "system"},
			ThroughProxy: []string{"tls://dns.example:853", "https://[2001:db8::53]:8443/q"},
			Serve:        true,
			Bootstrap:    "tcp://223.5.5.5:5353",
			CacheSize:    512,
			MinTTL:       30 * time.Second,
			MaxTTL:       6 * time.Hour,
			Timeout:      3 * time.Second,
			Rules: []spec.DNSRule{
				{Domain: []string{"router.lan"}, DomainSuffix: []string{"cn"}, DomainKeyword: []string{"cdn"},
					DomainRegex: []string{`^ntp[0-9]*\.`}, Servers: []string{"udp://223.5.5.5:53"}},
				{DomainSuffix: []string{"ads.example"}, Action: "block", BlockWith: "empty"},
			},
			FakeIP: &spec.FakeIP{IPv4: p("198.18.0.0/16"), IPv6: p("fc00::/18"), Filter: []string{"lan", "local"}, Size: 1000},
		},
		Health: spec.Health{
			TCPCheckURLs:   []string{"https://cp.example/generate_204", "http://192.0.2.1/"},
			TCPCheckMethod: "GET",
			UDPCheckDNS:    []string{"9.9.9.9:53", "[2001:db8::53]:53", "dns.example:5353"},
			CheckInterval:  time.Minute,
			CheckTimeout:   3 * time.Second,
			IdleTimeout:    time.Hour,
		},
		Warmup: spec.Warmup{Preconnect: 4, UDPWarmSet: 2},
		State:  spec.State{Path: filepath.Join(testdata, "state", "sy.db")},
		Route:  spec.Route{Final: "out-v4", Mode: "rule"},
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
			{Network: "tcp", Outbound: "pool"},
			{Port: []uint16{8443}, Outbound: "auto"},
			{Protocol: []string{"dns"}, Outbound: "dns-out"},
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
	_, _, err := Load(path)
	if err == nil || err.Error() != path+`:2: log.level: "loud" is not one of trace | debug | info | warn | error` {
		t.Fatalf("Load error = %v", err)
	}
	_, _, err = Load(filepath.Join(dir, "missing.toml"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of a missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestBalancerLowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "socks-a"
type = "socks"
server = "127.0.0.1:1081"
[[outbounds]]
tag = "socks-b"
type = "socks"
server = "127.0.0.1:1082"
[[outbounds]]
tag = "http"
type = "http"
server = "127.0.0.1:3128"
[[outbounds]]
tag = "ss"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
[[outbounds]]
tag = "trojan"
type = "trojan"
server = "127.0.0.1:443"
password = "p"
tls = {}
[[outbounds]]
tag = "vless"
type = "vless"
server = "127.0.0.1:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
[[outbounds]]
tag = "vmess"
type = "vmess"
server = "127.0.0.1:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
[[balancers]]
tag = "pool"
members = ["socks-a", "socks-b"]
[[balancers]]
tag = "rr"
members = ["vmess", "socks-a", "http", "vless", "ss", "trojan"]
strategy = "round_robin"
probe_interval = "1m30s"
probe_timeout = "2s"
[[balancers]]
tag = "fo"
members = ["socks-b"]
strategy = "failover"
[[rules]]
port = [443]
outbound = "rr"
[route]
final = "pool"
`)
	want := []spec.Balancer{
		{Tag: "pool", Members: []string{"socks-a", "socks-b"}, Strategy: "failover",
			ProbeInterval: 30 * time.Second, ProbeTimeout: 5 * time.Second},
		{Tag: "rr", Members: []string{"vmess", "socks-a", "http", "vless", "ss", "trojan"}, Strategy: "round_robin",
			ProbeInterval: 90 * time.Second, ProbeTimeout: 2 * time.Second},
		{Tag: "fo", Members: []string{"socks-b"}, Strategy: "failover",
			ProbeInterval: 30 * time.Second, ProbeTimeout: 5 * time.Second},
	}
	if !spec.Equal(s.Balancers, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Balancers, want)
	}
	if s.Route.Final != "pool" || len(s.Rules) != 1 || s.Rules[0].Outbound != "rr" {
		t.Fatalf("route %+v, rules %+v", s.Route, s.Rules)
	}
}

// The types a balancer may have as members are the proxy clients over a
// stream (those with a transport), and every such type the loader accepts
// may be one.
func TestProbeableTypesAreProxyClients(t *testing.T) {
	var clients []string
	for _, typ := range outboundTypes {
		if slices.Contains(outboundKeys[typ], "transport") && !slices.Contains(clients, typ) {
			clients = append(clients, typ)
		}
	}
	slices.Sort(clients)
	probeable := slices.Sorted(slices.Values(probeableTypes))
	if !slices.Equal(clients, probeable) {
		t.Fatalf("proxy client types %q, probeable types %q", clients, probeable)
	}
}

func TestProxyOutboundDefaults(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "socks"
type = "socks"
server = "127.0.0.1:1081"
username = ""
password = ""
[[outbounds]]
tag = "http"
type = "http"
server = "proxy.example:3128"
username = "u"
password = "p:w"
[[outbounds]]
tag = "ss"
type = "shadowsocks"
server = "[::ffff:192.0.2.1]:8388"
method = "aes-256-gcm"
password = "secret"
[[outbounds]]
tag = "ss-2022"
type = "shadowsocks"
server = "[2001:DB8::1]:8388"
method = "2022-blake3-aes-128-gcm"
password = "AAECAwQFBgcICQoLDA0ODw==:MjM0NTY3ODk6Ozw9Pj9AQQ=="
[[outbounds]]
tag = "trojan"
type = "trojan"
server = "Example.COM:443"
password = "secret"
tls = {}
[[outbounds]]
tag = "vless"
type = "vless"
server = "example.com:443"
uuid = "B831381D-6324-4d53-AD4F-8cda48b30811"
[[outbounds]]
tag = "vmess"
type = "vmess"
server = "192.0.2.7:10086"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
`)
	tcp := spec.Transport{Type: "tcp"}
	want := []spec.Outbound{
		{Tag: "socks", Type: "socks", AddressFamily: "auto", UDP: true, Server: "127.0.0.1:1081", Transport: tcp},
		{Tag: "http", Type: "http", AddressFamily: "auto", Server: "proxy.example:3128",
			Username: "u", Password: "p:w", Transport: tcp},
		{Tag: "ss", Type: "shadowsocks", AddressFamily: "auto", UDP: true, Server: "192.0.2.1:8388",
			Method: "aes-256-gcm", Password: "secret", Transport: tcp},
		{Tag: "ss-2022", Type: "shadowsocks", AddressFamily: "auto", UDP: true, Server: "[2001:db8::1]:8388",
			Method: "2022-blake3-aes-128-gcm", Password: "AAECAwQFBgcICQoLDA0ODw==:MjM0NTY3ODk6Ozw9Pj9AQQ==", Transport: tcp},
		{Tag: "trojan", Type: "trojan", AddressFamily: "auto", UDP: true, Server: "Example.COM:443",
			Password: "secret", Transport: tcp, TLS: &spec.TLS{ServerName: "Example.COM"}},
		{Tag: "vless", Type: "vless", AddressFamily: "auto", UDP: true, Server: "example.com:443",
			UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", Transport: tcp},
		{Tag: "vmess", Type: "vmess", AddressFamily: "auto", UDP: true, Server: "192.0.2.7:10086",
			UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", Security: "auto", GlobalPadding: true, Transport: tcp},
		implicitDirect(),
		implicitBlock(),
	}
	if len(s.Outbounds) != len(want) {
		t.Fatalf("got %d outbounds, want %d: %+v", len(s.Outbounds), len(want), s.Outbounds)
	}
	for i := range want {
		if !spec.Equal(s.Outbounds[i], want[i]) {
			t.Errorf("outbound %d:\n got  %+v %+v\n want %+v %+v", i, s.Outbounds[i], s.Outbounds[i].TLS, want[i], want[i].TLS)
		}
	}
}

func TestProxyOutboundKeys(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "socks"
type = "socks"
server = "127.0.0.1:1081"
udp = false
address_family = "prefer_ipv6"
drain = "close"
transport = {}
[[outbounds]]
tag = "vless"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
flow = ""
packet_encoding = "xudp"
transport = { type = "tcp" }
[[outbounds]]
tag = "vmess"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
security = "zero"
global_padding = false
packet_encoding = ""
[[outbounds]]
tag = "http"
type = "http"
server = "127.0.0.1:3128"
udp = false
`)
	tcp := spec.Transport{Type: "tcp"}
	want := []spec.Outbound{
		{Tag: "socks", Type: "socks", AddressFamily: "prefer_ipv6", Drain: spec.DrainClose,
			Server: "127.0.0.1:1081", Transport: tcp},
		{Tag: "vless", Type: "vless", AddressFamily: "auto", UDP: true, Server: "example.com:443",
			UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", PacketEncoding: "xudp", Transport: tcp},
		{Tag: "vmess", Type: "vmess", AddressFamily: "auto", UDP: true, Server: "example.com:443",
			UUID: "b831381d-6324-4d53-ad4f-8cda48b30811", Security: "zero", Transport: tcp},
		{Tag: "http", Type: "http", AddressFamily: "auto", Server: "127.0.0.1:3128", Transport: tcp},
		implicitDirect(),
		implicitBlock(),
	}
	if !spec.Equal(s.Outbounds, want) {
		t.Fatalf("got  %+v\nwant %+v", s.Outbounds, want)
	}
}

func TestTLSLowering(t *testing.T) {
	abs := filepath.Join(t.TempDir(), "x", "..", "ca.pem")
	s := mustParse(t, `
[[outbounds]]
tag = "name"
type = "socks"
server = "proxy.example:1080"
tls = { alpn = ["h2", "http/1.1"], ca_file = "certs/ca.pem" }
[[outbounds]]
tag = "v6"
type = "trojan"
server = "[2001:db8::5]:443"
password = "p"
tls = { verify = "insecure", alpn = [] }
[[outbounds]]
tag = "v4"
type = "vmess"
server = "192.0.2.9:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
tls = { server_name = "front.example", verify = "system", ca_file = '`+abs+`' }
`)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := []*spec.TLS{
		{ServerName: "proxy.example", ALPN: []string{"h2", "http/1.1"}, CAFile: filepath.Join(cwd, "certs", "ca.pem")},
		{ServerName: "2001:db8::5", Insecure: true},
		{ServerName: "front.example", CAFile: filepath.Clean(abs)},
	}
	for i, w := range want {
		if got := s.Outbounds[i].TLS; !spec.Equal(got, w) {
			t.Errorf("outbound %d: TLS %+v, want %+v", i, got, w)
		}
	}
}

// A relative ca_file is relative to the folder of the file it is written
// in, whatever the working directory; the file is not read while loading.
func TestLoadCAFileBesideTheConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conf", "sy.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	text := "[[outbounds]]\ntag = \"t\"\ntype = \"trojan\"\nserver = \"example.com:443\"\npassword = \"p\"\ntls = { ca_file = \"../pki/missing.pem\" }\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Dir(path))
	for _, p := range []string{path, "sy.toml"} {
		s, _, err := Load(p)
		if err != nil {
			t.Fatalf("Load(%q): %v", p, err)
		}
		if got, want := s.Outbounds[0].TLS.CAFile, filepath.Join(dir, "pki", "missing.pem"); got != want {
			t.Errorf("Load(%q): ca_file %q, want %q", p, got, want)
		}
	}
}

func TestTransportLowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "ws-plain"
type = "vless"
server = "example.com:80"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws" }
[[outbounds]]
tag = "ws-sni"
type = "vless"
server = "192.0.2.1:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", path = "/ray?ed=2048&x=1" }
tls = { server_name = "front.example" }
[[outbounds]]
tag = "ws-v6"
type = "vmess"
server = "[2001:db8::5]:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", path = "/ray?ed=0", headers = {} }
tls = {}
[[outbounds]]
tag = "ws-all"
type = "trojan"
server = "192.0.2.1:443"
password = "p"
transport = { type = "ws", path = "/a?b=c", host = "cdn.example", headers = { "User-Agent" = "x", "X-Tab" = "a\tb" }, max_early_data = 4096, early_data_header = "X-Ed" }
tls = { server_name = "front.example", alpn = ["http/1.1"], fingerprint = "chrome" }
[[outbounds]]
tag = "hu"
type = "socks"
server = "hu.example:1080"
transport = { type = "httpupgrade", path = "/up" }
tls = { server_name = "sni.example" }
[[outbounds]]
tag = "hu-host"
type = "http"
server = "hu.example:3128"
transport = { type = "httpupgrade", host = "h.example" }
[[outbounds]]
tag = "grpc"
type = "vmess"
server = "grpc.example:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "grpc" }
tls = {}
[[outbounds]]
tag = "grpc-all"
type = "vless"
server = "192.0.2.1:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "grpc", service_name = "svc.Tunnel/a", authority = "a.example", mode = "multi" }
tls = { server_name = "sni.example", alpn = ["h2"], fingerprint = "random" }
[[outbounds]]
tag = "grpc-h2c"
type = "vmess"
server = "grpc.example:80"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "grpc" }
[[outbounds]]
tag = "tcp"
type = "shadowsocks"
server = "192.0.2.1:8388"
method = "aes-128-gcm"
password = "p"
transport = {}
tls = {}
`)
	want := []struct {
		transport spec.Transport
		tls       *spec.TLS
	}{
		{spec.Transport{Type: "ws", Path: "/", Host: "example.com"}, nil},
		{spec.Transport{Type: "ws", Path: "/ray?x=1", Host: "front.example", MaxEarlyData: 2048, EarlyDataHeader: "Sec-WebSocket-Protocol"},
			&spec.TLS{ServerName: "front.example", ALPN: []string{"http/1.1"}}},
		{spec.Transport{Type: "ws", Path: "/ray", Host: "2001:db8::5"},
			&spec.TLS{ServerName: "2001:db8::5", ALPN: []string{"http/1.1"}}},
		{spec.Transport{Type: "ws", Path: "/a?b=c", Host: "cdn.example", Headers: map[string]string{"User-Agent": "x", "X-Tab": "a\tb"},
			MaxEarlyData: 4096, EarlyDataHeader: "X-Ed"},
			&spec.TLS{ServerName: "front.example", ALPN: []string{"http/1.1"}, Fingerprint: "chrome"}},
		{spec.Transport{Type: "httpupgrade", Path: "/up", Host: "sni.example"},
			&spec.TLS{ServerName: "sni.example", ALPN: []string{"http/1.1"}}},
		{spec.Transport{Type: "httpupgrade", Path: "/", Host: "h.example"}, nil},
		{spec.Transport{Type: "grpc", ServiceName: "grpc", Authority: "grpc.example", Mode: "gun"},
			&spec.TLS{ServerName: "grpc.example", ALPN: []string{"h2"}}},
		{spec.Transport{Type: "grpc", ServiceName: "svc.Tunnel/a", Authority: "a.example", Mode: "multi"},
			&spec.TLS{ServerName: "sni.example", ALPN: []string{"h2"}, Fingerprint: "random"}},
		{spec.Transport{Type: "grpc", ServiceName: "grpc", Authority: "grpc.example", Mode: "gun"}, nil}, // h2c
		{spec.Transport{Type: "tcp"}, &spec.TLS{ServerName: "192.0.2.1"}},
	}
	for i, w := range want {
		o := s.Outbounds[i]
		if !spec.Equal(o.Transport, w.transport) || !spec.Equal(o.TLS, w.tls) {
			t.Errorf("outbound %s:\n got  %+v %+v\n want %+v %+v", o.Tag, o.Transport, o.TLS, w.transport, w.tls)
		}
	}
}

func TestHysteria2Lowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "hy2"
type = "hysteria2"
server = "hy.example:443"
password = "secret"
[[outbounds]]
tag = "hy2-all"
type = "hysteria2"
server = "[2001:db8::7]:8443"
password = "secret"
obfs = { type = "salamander", password = "obfs" }
up_mbps = 100
down_mbps = 500
max_concurrent_streams = 8
address_family = "ipv6_only"
udp = false
drain = "close"
tls = { server_name = "sni.example", verify = "insecure" }
[[outbounds]]
tag = "hy2-alpn"
type = "hysteria2"
server = "192.0.2.1:443"
password = "secret"
tls = { alpn = ["h3"], ca_file = "/etc/ca.pem" }
`)
	want := []spec.Outbound{
		{Tag: "hy2", Type: "hysteria2", AddressFamily: "auto", UDP: true, Server: "hy.example:443", Password: "secret",
			MaxConcurrentStreams: 1024, TLS: &spec.TLS{ServerName: "hy.example", ALPN: []string{"h3"}}},
		{Tag: "hy2-all", Type: "hysteria2", AddressFamily: "ipv6_only", Drain: spec.DrainClose, Server: "[2001:db8::7]:8443",
			Password: "secret", Obfs: &spec.Obfs{Type: "salamander", Password: "obfs"}, UpMbps: 100, DownMbps: 500,
			MaxConcurrentStreams: 8, TLS: &spec.TLS{ServerName: "sni.example", ALPN: []string{"h3"}, Insecure: true}},
		{Tag: "hy2-alpn", Type: "hysteria2", AddressFamily: "auto", UDP: true, Server: "192.0.2.1:443", Password: "secret",
			MaxConcurrentStreams: 1024, TLS: &spec.TLS{ServerName: "192.0.2.1", ALPN: []string{"h3"}, CAFile: filepath.Clean("/etc/ca.pem")}},
	}
	for i, w := range want {
		if got := s.Outbounds[i]; !spec.Equal(got, w) {
			t.Errorf("outbound %d:\n got  %+v %+v\n want %+v %+v", i, got, got.TLS, w, w.TLS)
		}
	}
	// The default ALPN is not shared between specs.
	again := mustParse(t, "[[outbounds]]\ntag = \"h\"\ntype = \"hysteria2\"\nserver = \"hy.example:443\"\npassword = \"p\"\n")
	if &again.Outbounds[0].TLS.ALPN[0] == &s.Outbounds[0].TLS.ALPN[0] || &again.Outbounds[0].TLS.ALPN[0] == &hysteria2ALPN[0] {
		t.Fatal("two specs share one ALPN slice")
	}
}

func TestWireGuardLowering(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "wg"
type = "wireguard"
endpoint = "wg.example:51820"
private_key = "`+wgPrivate+`"
peer_public_key = "`+wgPeer+`"
addresses = ["10.7.0.2", "fd00:7::2", "10.8.0.2/24", "::ffff:10.9.0.1", "::ffff:10.10.0.1/120"]
[[outbounds]]
tag = "wg-all"
type = "wireguard"
endpoint = "[2001:db8::1]:51820"
endpoint_address_family = "ipv6_only"
private_key = "`+wgPrivate+`"
peer_public_key = "`+wgPeer+`"
preshared_key = "`+wgPSK+`"
addresses = ["10.7.0.2/32"]
mtu = 576
keepalive = "25s"
allowed_ips = ["10.1.2.3/8", "fd00::1/8", "192.0.2.1"]
reserved = [1, 2, 255]
address_family = "prefer_ipv4"
udp = false
drain = "keep"
[[outbounds]]
tag = "wg-empty"
type = "wireguard"
endpoint = "192.0.2.1:51820"
private_key = "`+wgPrivate+`"
peer_public_key = "`+wgPeer+`"
preshared_key = ""
addresses = ["fd00:7::2/64"]
mtu = 1280
keepalive = ""
reserved = [0, 0, 0]
`)
	p := netip.MustParsePrefix
	everything := []netip.Prefix{p("0.0.0.0/0"), p("::/0")}
	want := []spec.Outbound{
		{Tag: "wg", Type: "wireguard", AddressFamily: "auto", UDP: true,
			Endpoint: "wg.example:51820", EndpointAddressFamily: "auto", PrivateKey: wgPrivate, PeerPublicKey: wgPeer,
			Addresses: []netip.Prefix{p("10.7.0.2/32"), p("fd00:7::2/128"), p("10.8.0.2/24"), p("10.9.0.1/32"), p("10.10.0.1/24")},
			MTU:       1408, AllowedIPs: everything},
		{Tag: "wg-all", Type: "wireguard", AddressFamily: "prefer_ipv4", Drain: spec.DrainKeep,
			Endpoint: "[2001:db8::1]:51820", EndpointAddressFamily: "ipv6_only",
			PrivateKey: wgPrivate, PeerPublicKey: wgPeer, PresharedKey: wgPSK,
			Addresses: []netip.Prefix{p("10.7.0.2/32")}, MTU: 576, Keepalive: 25 * time.Second,
			AllowedIPs: []netip.Prefix{p("10.0.0.0/8"), p("fd00::/8"), p("192.0.2.1/32")},
			Reserved:   []byte{1, 2, 255}},
		{Tag: "wg-empty", Type: "wireguard", AddressFamily: "auto", UDP: true,
			Endpoint: "192.0.2.1:51820", EndpointAddressFamily: "auto", PrivateKey: wgPrivate, PeerPublicKey: wgPeer,
			Addresses: []netip.Prefix{p("fd00:7::2/64")}, MTU: 1280, AllowedIPs: everything, Reserved: []byte{0, 0, 0}},
	}
	for i, w := range want {
		if got := s.Outbounds[i]; !spec.Equal(got, w) {
			t.Errorf("outbound %d:\n got  %+v\n want %+v", i, got, w)
		}
	}
	if !spec.Equal(s.Outbounds[0].Transport, spec.Transport{}) || s.Outbounds[0].TLS != nil {
		t.Errorf("a wireguard outbound has a transport or TLS: %+v %+v", s.Outbounds[0].Transport, s.Outbounds[0].TLS)
	}
	// The default allowed IPs are not shared between specs.
	if &s.Outbounds[0].AllowedIPs[0] == &s.Outbounds[2].AllowedIPs[0] || &s.Outbounds[0].AllowedIPs[0] == &defaultAllowedIPs[0] {
		t.Fatal("two outbounds share one allowed_ips slice")
	}
}

// Shadowsocks over a transport other than tcp carries no UDP unless told
// otherwise (and check refuses being told so); other protocols over the same
// transport keep theirs.
func TestShadowsocksOverAStreamTransportDefaultsToNoUDP(t *testing.T) {
	s := mustParse(t, `
[[outbounds]]
tag = "ss-ws"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
transport = { type = "ws", host = "ss.example" }
[[outbounds]]
tag = "ss-grpc"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
tls = {}
transport = { type = "grpc", service_name = "ss" }
[[outbounds]]
tag = "ss-tcp"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
transport = { type = "tcp" }
[[outbounds]]
tag = "vless-ws"
type = "vless"
server = "127.0.0.1:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", host = "v.example" }
`)
	want := map[string]bool{"ss-ws": false, "ss-grpc": false, "ss-tcp": true, "vless-ws": true}
	for _, o := range s.Outbounds {
		if w, ok := want[o.Tag]; ok && o.UDP != w {
			t.Errorf("%s: udp = %v, want %v", o.Tag, o.UDP, w)
		}
	}
}
