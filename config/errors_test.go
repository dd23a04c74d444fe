package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// want is one expected problem: its line, its key, and a part of its text.
type want struct {
	line int
	key  string
	msg  string
}

// WireGuard keys: a private key, its public key, another side's public key
// and a preshared key.
const (
	wgPrivate = "ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8="
	wgPublic  = "NYBy1jZYgNGu6jKa35EhODhR7SGijjt16WXQ0s0WYlQ="
	wgPeer    = "eaYx7t4b+cmPEgMs3q3Q56B5OY/HhriMyEbsia+FpRo="
	wgPSK     = "oKGio6SlpqeoqaqrrK2ur7CxsrO0tba3uLm6u7y9vr8="
)

const socksIn = "[[inbounds]]\ntag = \"in\"\ntype = \"socks\"\nlisten = \"127.0.0.1:1080\"\n" // lines 1-4

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"unknown top-level table", `[log]
level = "info"

[metrics]
listen = "127.0.0.1:9100"
`, []want{{4, "metrics", `unknown key "metrics"`}}},

		{"unknown top-level key", `[log]
level = "info"
verbose = true
`, []want{{3, "log.verbose", `unknown key "verbose"`}}},

		{"unknown bare key at the top", `
colour = "blue"
`, []want{{2, "colour", `unknown key "colour"`}}},

		{"providers without a path", `[[providers]]
tag = "sub"
[[providers]]
tag = "sub2"
`, []want{
			{1, "providers[0].path", `required key is missing`},
			{3, "providers[1].path", `required key is missing`},
		}},

		{"unknown key inside the second inbound", socksIn + `
[[inbounds]]
tag = "in2"
type = "http"
lisen = "127.0.0.1:8080"
`, []want{
			{6, "inbounds[1].listen", "required key is missing"},
			{9, "inbounds[1].lisen", `unknown key "lisen"`},
		}},

		{"unknown key inside an inline users table", socksIn + `users = [
  { username = "a", password = "1" },
  { username = "b", pasword = "2" },
]
`, []want{
			{7, "inbounds[0].users[1].pasword", `unknown key "pasword"`},
			{7, "inbounds[0].users[1].password", "required key is missing"},
		}},

		{"unknown key in inline inbounds array", `inbounds = [
  { tag = "a", type = "socks", listen = "127.0.0.1:1", colour = 1 },
]
`, []want{{2, "inbounds[0].colour", `unknown key "colour"`}}},

		{"key in the wrong case", `[log]
Level = "debug"
`, []want{{2, "log.Level", `unknown key "Level" (keys are case-sensitive: did you mean "level"?)`}}},

		{"listen without a port", `[[inbounds]]
tag = "in"
type = "socks"
listen = "127.0.0.1"
`, []want{{4, "inbounds[0].listen", `bad address "127.0.0.1"`}}},

		{"listen on a name", `[[inbounds]]
tag = "in"
type = "mixed"
listen = "localhost:7890"
`, []want{{4, "inbounds[0].listen", "the host must be an IP address"}}},

		{"listen port out of range", `[[inbounds]]
tag = "in"
type = "mixed"
listen = "[::1]:70000"
`, []want{{4, "inbounds[0].listen", "port must be a number from 0 to 65535"}}},

		{"two inbounds on one address", socksIn + `[[inbounds]]
tag = "in2"
type = "http"
listen = "127.0.0.1:1080"
`, []want{{8, "inbounds[1].listen", "127.0.0.1:1080 is already the listen address of inbounds[0]"}}},

		{"bad handshake bounds", socksIn + `handshake_timeout = "0s"
max_handshakes = 0
`, []want{
			{5, "inbounds[0].handshake_timeout", `"0s" must be above zero`},
			{6, "inbounds[0].max_handshakes", "0 is out of range 1..1048576"},
		}},

		{"handshake timeout not a duration", socksIn + `handshake_timeout = 10
`, []want{{5, "inbounds[0].handshake_timeout", ""}}},

		{"duplicate inbound tag", socksIn + `[[inbounds]]
tag = "in"
type = "http"
listen = "127.0.0.1:8080"
`, []want{{6, "inbounds[1].tag", `duplicate inbound tag "in" (first declared on line 2)`}}},

		{"duplicate outbound tag", `[[outbounds]]
tag = "out"
type = "direct"

[[outbounds]]
tag = "out"
type = "block"
`, []want{{6, "outbounds[1].tag", `duplicate outbound tag "out" (first declared on line 2)`}}},

		{"unknown outbound type, its own keys not reported", `[[outbounds]]
tag = "a"
type = "direct"

[[outbounds]]
tag = "t"
type = "tuic"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
password = "secret"
congestion_control = "bbr"
tls = { server_name = "example.com", fingerprint = "quic" }

[[rules]]
outbound = "t"
`, []want{{7, "outbounds[1].type", `unknown outbound type "tuic"`}}},

		{"every other outbound type is unknown", `[[outbounds]]
tag = "a"
type = "tuic"
[[outbounds]]
tag = "b"
type = "hysteria"
[[outbounds]]
tag = "c"
type = "Direct"
[[outbounds]]
tag = "d"
type = "DNS"
[[outbounds]]
tag = "e"
type = "socks5"
`, []want{
			{3, "outbounds[0].type", `unknown outbound type "tuic"`},
			{6, "outbounds[1].type", `unknown outbound type "hysteria"`},
			{9, "outbounds[2].type", `unknown outbound type "Direct"`},
			{12, "outbounds[3].type", `unknown outbound type "DNS"`},
			{15, "outbounds[4].type", `unknown outbound type "socks5"`},
		}},

		{"unknown inbound type, its own keys not reported", `[[inbounds]]
tag = "tun-in"
type = "tunnel"
name = "sy0"
mtu = 9000
`, []want{{3, "inbounds[0].type", `unknown inbound type "tunnel"`}}},

		{"missing type keeps unknown keys", `[[inbounds]]
tag = "x"
tpye = "socks"
listen = "127.0.0.1:1"
`, []want{
			{1, "inbounds[0].type", "required key is missing"},
			{3, "inbounds[0].tpye", `unknown key "tpye"`},
		}},

		{"missing and empty required keys", `[[outbounds]]
type = "direct"
[[outbounds]]
tag = ""
type = "direct"
[[rules]]
domain = ["a.example"]
`, []want{
			{1, "outbounds[0].tag", "required key is missing"},
			{4, "outbounds[1].tag", "must not be empty"},
			{6, "rules[0].outbound", "required key is missing"},
		}},

		{"rule names an unknown outbound", `[[outbounds]]
tag = "a"
type = "direct"
[[rules]]
port = [443]
outbound = "proxy"
`, []want{{6, "rules[0].outbound", `unknown outbound "proxy"`}}},

		{"rule names an unknown inbound", socksIn + `[[rules]]
inbound = [
  "in",
  "tun-in",
]
outbound = "direct"
`, []want{{8, "rules[0].inbound[1]", `unknown inbound "tun-in"`}}},

		{"route.final unknown", `[route]
final = "proxy"
`, []want{{2, "route.final", `unknown outbound "proxy"`}}},

		{"bad CIDR on its own line", `[[rules]]
outbound = "direct"
ip_cidr = [
  "10.0.0.0/8",
  "10.0.0.0/33",
  "example.com",
]
source_ip_cidr = ["fe80::1%eth0"]
`, []want{
			{5, "rules[0].ip_cidr[1]", `"10.0.0.0/33" is not an IP prefix`},
			{6, "rules[0].ip_cidr[2]", `"example.com" is not an IP prefix`},
			{8, "rules[0].source_ip_cidr[0]", `"fe80::1%eth0" is not an IP prefix`},
		}},

		{"bad regex", `[[rules]]
outbound = "direct"
domain_regex = ["^ok$", "(unclosed"]
`, []want{{3, "rules[0].domain_regex[1]", `bad regex "(unclosed": missing closing )`}}},

		{"bad ports and port ranges", `[[rules]]
outbound = "direct"
port = [443, 70000, -1]
port_range = ["2000:1000", "1000-2000", "1:65536", "5:5"]
`, []want{
			{3, "rules[0].port[1]", "port 70000 is out of range 0..65535"},
			{3, "rules[0].port[2]", "port -1 is out of range 0..65535"},
			{4, "rules[0].port_range[0]", `"2000:1000": the low port is above the high port`},
			{4, "rules[0].port_range[1]", `"1000-2000" is not a port range`},
			{4, "rules[0].port_range[2]", `"1:65536" is not a port range`},
		}},

		{"bad durations", `[dial]
connect_timeout = "10"
[socket]
tcp_keepalive_idle = "-5s"
`, []want{
			{2, "dial.connect_timeout", `"10" is not a duration`},
			{4, "socket.tcp_keepalive_idle", `"-5s" must be above zero`},
		}},

		{"zero connect timeout and dial limit", `[dial]
connect_timeout = "0s"
max_concurrent_dials = 0
`, []want{
			{2, "dial.connect_timeout", `"0s" must be above zero`},
			{3, "dial.max_concurrent_dials", "0 is out of range 1.."},
		}},

		{"udp association caps", `[[inbounds]]
tag = "s"
type = "socks"
listen = "127.0.0.1:1080"
max_udp_associations = 0
[[inbounds]]
tag = "h"
type = "http"
listen = "127.0.0.1:8080"
max_udp_associations = 10
`, []want{
			{5, "inbounds[0].max_udp_associations", "0 is out of range 1.."},
			{10, "inbounds[1].max_udp_associations", "an http inbound has no UDP"},
		}},

		{"bad enum values", `[log]
level = "verbose"
format = "xml"
[reload]
drain = "later"
[[outbounds]]
tag = "d"
type = "direct"
address_family = "ipv5"
drain = ""
[[outbounds]]
tag = "d2"
type = "direct"
drain = "soon"
[[rules]]
network = "icmp"
protocol = ["tls", "ssh"]
outbound = "d"
`, []want{
			{2, "log.level", `"verbose" is not one of trace | debug | info | warn | error`},
			{3, "log.format", `"xml" is not one of text | json`},
			{5, "reload.drain", `"later" is not one of keep | close`},
			{9, "outbounds[0].address_family", `"ipv5" is not one of auto | ipv4_only | ipv6_only | prefer_ipv4 | prefer_ipv6`},
			{14, "outbounds[1].drain", `"soon" is not one of keep | close`},
			{16, "rules[0].network", `"icmp" is not one of tcp | udp`},
			{17, "rules[0].protocol[1]", `"ssh" is not one of tls | http | quic | dns`},
		}},

		{"empty enum value is refused where it has a default", `[log]
level = ""
`, []want{{2, "log.level", `"" is not one of`}}},

		{"address_family on block", `[[outbounds]]
tag = "b"
type = "blackhole"
address_family = "auto"
`, []want{{4, "outbounds[0].address_family", "a block outbound has no address family"}}},

		{"two bind addresses of one family", `[socket]
bind_address = [
  "192.0.2.1",
  "2001:db8::1",
  "::ffff:192.0.2.2",
  "not-an-ip",
]
`, []want{
			{5, "socket.bind_address[2]", "a second IPv4 address (socket.bind_address[0] has one)"},
			{6, "socket.bind_address[3]", `"not-an-ip" is not an IP address`},
		}},

		{"socket mark out of range", `[socket]
mark = 4294967296
`, []want{{2, "socket.mark", "4294967296 is out of range 0..4294967295"}}},

		{"udp on an http inbound", `[[inbounds]]
tag = "h"
type = "http"
listen = "127.0.0.1:8080"
udp = true
`, []want{{5, "inbounds[0].udp", "an http inbound has no UDP"}}},

		{"users", `[[inbounds]]
tag = "s"
type = "socks"
listen = "127.0.0.1:1080"
users = [
  { username = "", password = "p" },
  { username = "a", password = "p" },
  { username = "a", password = "q" },
]
`, []want{
			{6, "inbounds[0].users[0].username", "must not be empty"},
			{8, "inbounds[0].users[2].username", `duplicate username "a"`},
		}},

		{"a SOCKS5 username longer than 255 bytes", `[[inbounds]]
tag = "s"
type = "mixed"
listen = "127.0.0.1:1080"
users = [{ username = "` + strings.Repeat("u", 256) + `", password = "p" }]
[[inbounds]]
tag = "h"
type = "http"
listen = "127.0.0.1:8080"
users = [{ username = "` + strings.Repeat("u", 256) + `", password = "p" }]
`, []want{{5, "inbounds[0].users[0]", "SOCKS5 carries at most 255 bytes"}}},

		{"empty rule values", `[[rules]]
domain = [""]
domain_suffix = ["."]
user = [""]
outbound = "direct"
`, []want{
			{2, "rules[0].domain[0]", "must not be empty"},
			{3, "rules[0].domain_suffix[0]", "must not be empty"},
			{4, "rules[0].user[0]", "must not be empty"},
		}},

		{"wrong value type stops decoding", `[[inbounds]]
tag = 1
type = "vmess"
`, []want{{2, "inbounds[0].tag", "expected a string, found an integer"}}},

		{"wrong element type", `[[rules]]
outbound = "direct"
port = [443,
  "https"]
`, []want{{4, "rules[0].port[1]", "expected an integer, found a string"}}},

		{"table where a list is expected", `[[rules]]
outbound = "direct"
ip_cidr = "10.0.0.0/8"
`, []want{{3, "rules[0].ip_cidr", "expected a list of strings, found a string"}}},

		{"syntax error", `[log]
level = "info"
format = 
`, []want{{3, "", "at start of value"}}},

		{"duplicate key", `[log]
level = "info"
level = "debug"
`, []want{{3, "log.level", "already defined"}}},

		{"balancer tag missing or empty", `[[balancers]]
members = ["direct"]
[[balancers]]
tag = ""
members = ["direct"]
`, []want{
			{1, "balancers[0].tag", "required key is missing"},
			{2, "balancers[0].members[0]", "balancer : outbound direct has no upstream a TCP health probe can reach"},
			{4, "balancers[1].tag", "balancer : a balancer tag must not be empty"},
			{5, "balancers[1].members[0]", "balancer : outbound direct has no upstream a TCP health probe can reach"},
		}},

		{"balancer tags share the outbound namespace", `[[outbounds]]
tag = "out"
type = "direct"
[[balancers]]
tag = "pool"
members = ["nowhere"]
[[balancers]]
tag = "pool"
members = ["nowhere"]
[[balancers]]
tag = "out"
members = ["nowhere"]
[[balancers]]
tag = "direct"
members = ["nowhere"]
[[balancers]]
tag = "block"
members = ["nowhere"]
`, []want{
			{6, "balancers[0].members[0]", "balancer pool references unknown outbound nowhere"},
			{8, "balancers[1].tag", "duplicate balancer tag pool"},
			{9, "balancers[1].members[0]", "balancer pool references unknown outbound nowhere"},
			{11, "balancers[2].tag", "duplicate balancer tag out"},
			{12, "balancers[2].members[0]", "balancer out references unknown outbound nowhere"},
			{14, "balancers[3].tag", "duplicate balancer tag direct"},
			{15, "balancers[3].members[0]", "balancer direct references unknown outbound nowhere"},
			{17, "balancers[4].tag", "duplicate balancer tag block"},
			{18, "balancers[4].members[0]", "balancer block references unknown outbound nowhere"},
		}},

		{"balancer tag equal to an outbound declared after it", `[[balancers]]
tag = "late"
members = ["x"]
[[outbounds]]
tag = "late"
type = "block"
`, []want{
			{2, "balancers[0].tag", "duplicate balancer tag late"},
			{3, "balancers[0].members[0]", "balancer late references unknown outbound x"},
		}},

		{"balancer without members", `[[balancers]]
tag = "a"
[[balancers]]
tag = "b"
members = []
`, []want{
			{1, "balancers[0].members", "balancer a has no members"},
			{5, "balancers[1].members", "balancer b has no members"},
		}},

		{"balancer members are outbounds only", `[[balancers]]
tag = "inner"
members = ["gone"]
[[balancers]]
tag = "outer"
members = [
  "inner",
  "",
]
`, []want{
			{3, "balancers[0].members[0]", "balancer inner references unknown outbound gone"},
			{7, "balancers[1].members[0]", "balancer outer references unknown outbound inner"},
			{8, "balancers[1].members[1]", "balancer outer references unknown outbound "},
		}},

		{"balancer members need a TCP upstream", `[[outbounds]]
tag = "out"
type = "freedom"
[[outbounds]]
tag = "deny"
type = "blackhole"
[[balancers]]
tag = "pool"
members = ["out", "deny", "direct", "block"]
`, []want{
			{9, "balancers[0].members[0]", "balancer pool: outbound out has no upstream a TCP health probe can reach"},
			{9, "balancers[0].members[1]", "balancer pool: outbound deny has no upstream a TCP health probe can reach"},
			{9, "balancers[0].members[2]", "balancer pool: outbound direct has no upstream a TCP health probe can reach"},
			{9, "balancers[0].members[3]", "balancer pool: outbound block has no upstream a TCP health probe can reach"},
		}},

		{"balancer member with a refused type adds no problem", `[[outbounds]]
tag = "tuic"
type = "tuic"
server = "192.0.2.1:443"
[[outbounds]]
tag = "tor-out"
type = "tor"
[[outbounds]]
tag = "typeless"
[[balancers]]
tag = "pool"
members = ["tuic", "tor-out", "typeless"]
`, []want{
			{3, "outbounds[0].type", `unknown outbound type "tuic"`},
			{7, "outbounds[1].type", `unknown outbound type "tor"`},
			{8, "outbounds[2].type", "required key is missing"},
		}},

		{"balancer members over UDP are refused", `[[outbounds]]
tag = "hy2"
type = "hysteria2"
server = "192.0.2.1:443"
password = "p"
[[outbounds]]
tag = "wg"
type = "wireguard"
endpoint = "192.0.2.1:51820"
private_key = "` + wgPrivate + `"
peer_public_key = "` + wgPeer + `"
addresses = ["10.7.0.2"]
[[outbounds]]
tag = "ss"
type = "shadowsocks"
server = "192.0.2.1:8388"
method = "aes-128-gcm"
password = "p"
[[balancers]]
tag = "pool"
members = ["ss", "hy2", "wg", "direct"]
`, []want{
			{21, "balancers[0].members[1]", "balancer pool: outbound hy2 has no upstream a TCP health probe can reach"},
			{21, "balancers[0].members[2]", "balancer pool: outbound wg has no upstream a TCP health probe can reach"},
			{21, "balancers[0].members[3]", "balancer pool: outbound direct has no upstream a TCP health probe can reach"},
		}},

		{"balancer strategy and probe durations", `[[balancers]]
tag = "pool"
members = ["nowhere"]
strategy = "random"
probe_interval = "0s"
probe_timeout = "5"
[[balancers]]
tag = "p2"
members = ["nowhere"]
strategy = "Failover"
probe_interval = "-1s"
`, []want{
			{3, "balancers[0].members[0]", "balancer pool references unknown outbound nowhere"},
			{4, "balancers[0].strategy", `balancer pool: unknown balancer strategy "random" (expected "failover" or "round_robin")`},
			{5, "balancers[0].probe_interval", `"0s" must be above zero`},
			{6, "balancers[0].probe_timeout", `"5" is not a duration`},
			{9, "balancers[1].members[0]", "balancer p2 references unknown outbound nowhere"},
			{10, "balancers[1].strategy", `balancer p2: unknown balancer strategy "Failover" (expected "failover" or "round_robin")`},
			{11, "balancers[1].probe_interval", `"-1s" must be above zero`},
		}},

		{"unknown key in a balancer", `[[balancers]]
tag = "pool"
members = ["nowhere"]
probe = "tcp"
`, []want{
			{3, "balancers[0].members[0]", "balancer pool references unknown outbound nowhere"},
			{4, "balancers[0].probe", `unknown key "probe"`},
		}},

		{"wrong type in a balancer", `[[balancers]]
tag = "pool"
members = "direct"
`, []want{{3, "balancers[0].members", "expected a list of strings, found a string"}}},

		{"rules and route.final may name a balancer", `[[balancers]]
tag = "pool"
members = ["direct"]
[[rules]]
port = [443]
outbound = "pool"
[[rules]]
outbound = "poll"
[route]
final = "pool"
`, []want{
			{3, "balancers[0].members[0]", "balancer pool: outbound direct has no upstream a TCP health probe can reach"},
			{8, "rules[1].outbound", `unknown outbound "poll"`},
		}},

		{"problems from every section in line order", `[[rules]]
outbound = "nowhere"
[log]
level = "loud"
[[outbounds]]
tag = "x"
type = "trojan"
server = "example.com:443"
[route]
final = "x"
[[outbounds]]
tag = "y"
type = "dns"
`, []want{
			{2, "rules[0].outbound", `unknown outbound "nowhere"`},
			{4, "log.level", `"loud" is not one of`},
			{5, "outbounds[0].password", "required key is missing"},
			{5, "outbounds[0].tls", "trojan needs a tls table"},
			{13, "outbounds[1].type", `a dns outbound answers with the resolvers of [dns], and this file has no [dns] table`},
		}},

		{"proxy clients need a usable server", `[[outbounds]]
tag = "s"
type = "socks"
[[outbounds]]
tag = "h"
type = "http"
server = ""
[[outbounds]]
tag = "ss"
type = "shadowsocks"
server = "example.com"
method = "aes-128-gcm"
password = "p"
[[outbounds]]
tag = "t"
type = "trojan"
server = "example.com:0"
password = "p"
tls = {}
[[outbounds]]
tag = "vl"
type = "vless"
server = "exa mple.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
[[outbounds]]
tag = "vm"
type = "vmess"
server = "[fe80::1%eth0]:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
`, []want{
			{1, "outbounds[0].server", "required key is missing"},
			{7, "outbounds[1].server", "must not be empty"},
			{11, "outbounds[2].server", `bad address "example.com"`},
			{17, "outbounds[3].server", `"example.com:0": port 0 is not a server port`},
			{23, "outbounds[4].server", `"exa mple.com" is neither an IP nor a host name`},
			{28, "outbounds[5].server", "zoned addresses are not supported"},
		}},

		{"socks and http usernames and passwords go together", `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
username = "u"
[[outbounds]]
tag = "b"
type = "socks"
server = "127.0.0.1:1081"
username = ""
password = "p"
[[outbounds]]
tag = "c"
type = "http"
server = "127.0.0.1:3128"
username = "u"
password = ""
[[outbounds]]
tag = "d"
type = "http"
server = "127.0.0.1:3128"
password = "p"
`, []want{
			{1, "outbounds[0].password", "required key is missing (with a username)"},
			{10, "outbounds[1].username", "must not be empty (with a password)"},
			{17, "outbounds[2].password", "must not be empty (with a username)"},
			{18, "outbounds[3].username", "required key is missing (with a password)"},
		}},

		{"socks credentials longer than 255 bytes, an http username with a colon", `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
username = "` + strings.Repeat("u", 256) + `"
password = "` + strings.Repeat("p", 300) + `"
[[outbounds]]
tag = "b"
type = "socks"
server = "127.0.0.1:1081"
username = "` + strings.Repeat("u", 255) + `"
password = "` + strings.Repeat("p", 255) + `"
[[outbounds]]
tag = "c"
type = "http"
server = "127.0.0.1:3128"
username = "a:b"
password = "` + strings.Repeat("p", 300) + `"
`, []want{
			{5, "outbounds[0].username", "SOCKS5 carries at most 255 bytes (RFC 1929); this is 256"},
			{6, "outbounds[0].password", "SOCKS5 carries at most 255 bytes (RFC 1929); this is 300"},
			{17, "outbounds[2].username", `HTTP Basic authentication cannot carry ":" in a username`},
		}},

		{"udp on an http outbound", `[[outbounds]]
tag = "h"
type = "http"
server = "127.0.0.1:3128"
udp = true
[[outbounds]]
tag = "h2"
type = "http"
server = "127.0.0.1:3128"
udp = false
`, []want{{5, "outbounds[0].udp", "http carries no datagrams"}}},

		{"udp on shadowsocks over a stream transport", `[[outbounds]]
tag = "a"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
transport = { type = "tcp" }
udp = true
[[outbounds]]
tag = "b"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
tls = {}
transport = { type = "grpc", service_name = "ss" }
udp = false
[[outbounds]]
tag = "c"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
transport = { type = "ws", host = "ss.example" }
udp = true
[[outbounds]]
tag = "d"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "aes-128-gcm"
password = "p"
transport = { type = "httpupgrade", host = "ss.example" }
udp = true
`, []want{
			{25, "outbounds[2].udp", "shadowsocks over a ws transport carries no UDP (its datagrams would bypass the transport)"},
			{33, "outbounds[3].udp", "shadowsocks over an httpupgrade transport carries no UDP (its datagrams would bypass the transport)"},
		}},

		{"shadowsocks method and password", `[[outbounds]]
tag = "a"
type = "shadowsocks"
server = "127.0.0.1:8388"
[[outbounds]]
tag = "b"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "rc4-md5"
password = ""
[[outbounds]]
tag = "c"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = ""
password = "p"
`, []want{
			{1, "outbounds[0].method", "required key is missing"},
			{1, "outbounds[0].password", "required key is missing"},
			{9, "outbounds[1].method", `"rc4-md5" is not one of aes-128-gcm | aes-256-gcm | chacha20-ietf-poly1305 | 2022-blake3-aes-128-gcm | 2022-blake3-aes-256-gcm | 2022-blake3-chacha20-poly1305`},
			{10, "outbounds[1].password", "must not be empty"},
			{15, "outbounds[2].method", "must not be empty"},
		}},

		{"shadowsocks 2022 keys", `[[outbounds]]
tag = "a"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "2022-blake3-aes-128-gcm"
password = "secret"
[[outbounds]]
tag = "b"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "2022-blake3-aes-256-gcm"
password = "AAAAAAAAAAAAAAAAAAAAAA=="
[[outbounds]]
tag = "c"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "2022-blake3-aes-256-gcm"
password = "AAAAAAAAAAAAAAAAAAAAAA==:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=::not base64"
[[outbounds]]
tag = "d"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "2022-blake3-chacha20-poly1305"
password = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
[[outbounds]]
tag = "e"
type = "shadowsocks"
server = "127.0.0.1:8388"
method = "2022-blake3-aes-128-gcm"
password = "AAAAAAAAAAAAAAAAAAAAAA"
`, []want{
			{6, "outbounds[0].password", `the key is not base64 (standard alphabet, padded); make one with "openssl rand -base64 16"`},
			{12, "outbounds[1].password", "the key decodes to 16 bytes; 2022-blake3-aes-256-gcm takes 32"},
			{18, "outbounds[2].password", "key 1 of 4 (an identity key) decodes to 16 bytes; 2022-blake3-aes-256-gcm takes 32"},
			{18, "outbounds[2].password", "key 3 of 4 (an identity key) is empty"},
			{18, "outbounds[2].password", "key 4 of 4 (the user key) is not base64"},
			{24, "outbounds[3].password", `2022-blake3-chacha20-poly1305 takes the user key alone: identity keys ("iPSK:uPSK") need an AES method`},
			{30, "outbounds[4].password", "the key is not base64"},
		}},

		{"trojan needs a password and a tls table", `[[outbounds]]
tag = "t"
type = "trojan"
server = "example.com:443"
[[outbounds]]
tag = "t2"
type = "trojan"
server = "example.com:443"
password = ""
transport = { type = "tcp" }
`, []want{
			{1, "outbounds[0].password", "required key is missing"},
			{1, "outbounds[0].tls", "trojan needs a tls table"},
			{5, "outbounds[1].tls", "trojan needs a tls table"},
			{9, "outbounds[1].password", "must not be empty"},
		}},

		{"vless uuid, flow and packet encoding", `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "{b831381d-6324-4d53-ad4f-8cda48b30811}"
flow = "xtls-rprx-vision"
packet_encoding = "packetaddr"
[[outbounds]]
tag = "c"
type = "vless"
server = "example.com:443"
uuid = "b831381d63244d53ad4f8cda48b30811"
flow = "xtls-rprx-direct"
packet_encoding = "XUDP"
`, []want{
			{1, "outbounds[0].uuid", "required key is missing"},
			{9, "outbounds[1].uuid", "not a UUID: expected 32 hex digits in the 8-4-4-4-12 form"},
			{10, "outbounds[1].flow", `the vision flow runs over TLS 1.3 or REALITY: it needs a tls table`},
			{11, "outbounds[1].packet_encoding", `unknown packet encoding "packetaddr" (expected "" or "xudp")`},
			{16, "outbounds[2].uuid", "not a UUID"},
			{17, "outbounds[2].flow", `unknown flow "xtls-rprx-direct"`},
			{18, "outbounds[2].packet_encoding", `unknown packet encoding "XUDP"`},
		}},

		{"vmess security, uuid and alter_id", `[[outbounds]]
tag = "v"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b3081g"
security = "aes-256-gcm"
alter_id = 0
packet_encoding = "packet"
`, []want{
			{5, "outbounds[0].uuid", "not a UUID"},
			{6, "outbounds[0].security", `"aes-256-gcm" is not one of auto | aes-128-gcm | chacha20-poly1305 | none | zero`},
			{7, "outbounds[0].alter_id", `unknown key "alter_id"`},
			{8, "outbounds[0].packet_encoding", `unknown packet encoding "packet"`},
		}},

		{"keys another outbound type takes", `[[outbounds]]
tag = "s"
type = "socks"
server = "127.0.0.1:1081"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
[[outbounds]]
tag = "t"
type = "trojan"
server = "example.com:443"
password = "p"
method = "aes-128-gcm"
tls = {}
[[outbounds]]
tag = "d"
type = "direct"
server = "127.0.0.1:1"
tls = { server_name = "example.com" }
transport = { type = "ws" }
[[outbounds]]
tag = "b"
type = "block"
global_padding = false
[[outbounds]]
tag = "h"
type = "http"
server = "127.0.0.1:3128"
flow = ""
security = "auto"
`, []want{
			{5, "outbounds[0].uuid", "a socks outbound has no uuid"},
			{11, "outbounds[1].method", "a trojan outbound has no method"},
			{16, "outbounds[2].server", "a direct outbound has no server"},
			{17, "outbounds[2].tls", "a direct outbound has no tls"},
			{18, "outbounds[2].transport", "a direct outbound has no transport"},
			{22, "outbounds[3].global_padding", "a block outbound has no global padding"},
			{27, "outbounds[4].flow", "an http outbound has no flow"},
			{28, "outbounds[4].security", "an http outbound has no security"},
		}},

		{"ws transport keys", `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
[outbounds.transport]
type = "ws"
path = "ray"
host = "exa mple.com"
max_early_data = -1
early_data_header = "X-Ed"
service_name = "grpc"
headers = { "User Agent" = "x", Host = "h", Upgrade = "websocket", "X-Ok" = "a\r\nb", "x-dup" = "1", "X-Dup" = "2" }
`, []want{
			{8, "outbounds[0].transport.path", `"ray" must start with "/"`},
			{9, "outbounds[0].transport.host", `"exa mple.com" is not a host name or an IP address`},
			{10, "outbounds[0].transport.max_early_data", "-1 is out of range 0..2147483647"},
			{11, "outbounds[0].transport.early_data_header", "an early data header has no use without early data (max_early_data is 0)"},
			{12, "outbounds[0].transport.service_name", "a ws transport has no service name"},
			{13, "outbounds[0].transport.headers.Host", "set the transport's host key instead of a Host header"},
			{13, "outbounds[0].transport.headers.Upgrade", "Upgrade is written by the WebSocket handshake itself"},
			{13, `outbounds[0].transport.headers."User Agent"`, `"User Agent" is not an HTTP header name`},
			{13, "outbounds[0].transport.headers.X-Ok", "a header value cannot hold control characters (CR, LF, NUL...)"},
			{13, "outbounds[0].transport.headers.x-dup", `header "x-dup" is set twice (as "X-Dup" too; header names are case-insensitive)`},
		}},

		{"ws early data and paths", `[[outbounds]]
tag = "a"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", path = "/ray?ed=2048", max_early_data = 2048 }
[[outbounds]]
tag = "b"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", path = "/ray?ed=x" }
[[outbounds]]
tag = "c"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", path = "/ray?ed=1&ed=2" }
[[outbounds]]
tag = "d"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", path = "/ray?ed=1", headers = { "sec-websocket-protocol" = "chat" } }
[[outbounds]]
tag = "e"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", max_early_data = 16, early_data_header = "Bad Header" }
[[outbounds]]
tag = "f"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", max_early_data = 16, early_data_header = "", path = "/a b" }
[[outbounds]]
tag = "g"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws", path = "/x#frag", max_early_data = 2147483648 }
`, []want{
			{6, "outbounds[0].transport.max_early_data", `max_early_data and the path's "ed=" both set early data; keep one`},
			{12, "outbounds[1].transport.path", `"/ray?ed=x": "ed=" takes a number of bytes 0..2147483647`},
			{18, "outbounds[2].transport.path", `"/ray?ed=1&ed=2": "ed=" is given twice`},
			{24, "outbounds[3].transport.headers.sec-websocket-protocol", "Sec-WebSocket-Protocol carries the early data; it cannot be set in headers too"},
			{30, "outbounds[4].transport.early_data_header", `"Bad Header" is not an HTTP header name`},
			{36, "outbounds[5].transport.path", `"/a b": a request path is printable ASCII without spaces or "#" (percent-encode the rest)`},
			{36, "outbounds[5].transport.early_data_header", "must not be empty"},
			{42, "outbounds[6].transport.path", `"/x#frag": a request path is printable ASCII`},
			{42, "outbounds[6].transport.max_early_data", "2147483648 is out of range 0..2147483647"},
		}},

		{"httpupgrade transport keys", `[[outbounds]]
tag = "a"
type = "trojan"
server = "example.com:443"
password = "p"
tls = {}
transport = { type = "httpupgrade", path = "/up?ed=2048", host = "", headers = { A = "b" }, max_early_data = 1, mode = "gun" }
`, []want{
			{7, "outbounds[0].transport.headers", "an httpupgrade transport has no headers"},
			{7, "outbounds[0].transport.max_early_data", "an httpupgrade transport has no max early data"},
			{7, "outbounds[0].transport.mode", "an httpupgrade transport has no mode"},
			{7, "outbounds[0].transport.path", `an httpupgrade transport carries no early data: take "ed=" out of the path`},
			{7, "outbounds[0].transport.host", "must not be empty"},
		}},

		{"grpc transport keys and its tls table", `[[outbounds]]
tag = "a"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "grpc", service_name = "my service", authority = "a:1", mode = "stream", path = "/" }
[[outbounds]]
tag = "b"
type = "trojan"
server = "example.com:443"
password = "p"
transport = { type = "grpc" }
[[outbounds]]
tag = "c"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "grpc", service_name = "" }
tls = { alpn = ["http/1.1"] }
[[outbounds]]
tag = "d"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
transport = { type = "ws" }
tls = { alpn = ["h2", "http/1.1"], fingerprint = "opera" }
[[outbounds]]
tag = "e"
type = "socks"
server = "127.0.0.1:1080"
transport = { type = "httpupgrade" }
tls = { alpn = ["h2"], fingerprint = "Chrome" }
[[outbounds]]
tag = "f"
type = "socks"
server = "127.0.0.1:1080"
transport = { type = "ws" }
tls = { alpn = [] }
[[outbounds]]
tag = "g"
type = "socks"
server = "127.0.0.1:1080"
transport = { type = "grpc" }
tls = { alpn = ["h2", "http/1.1"] }
`, []want{
			{6, "outbounds[0].transport.path", "a grpc transport has no path"},
			{6, "outbounds[0].transport.service_name", `"my service": a gRPC service name cannot hold spaces, control characters, "?" or "#"`},
			{6, "outbounds[0].transport.authority", `"a:1" is not a host name or an IP address`},
			{6, "outbounds[0].transport.mode", `"stream" is not one of gun | multi`},
			{7, "outbounds[1].tls", "trojan needs a tls table"},
			{18, "outbounds[2].transport.service_name", "must not be empty"},
			{19, "outbounds[2].tls.alpn", `gRPC runs over HTTP/2: alpn is ["h2"] or left out`},
			{26, "outbounds[3].tls.fingerprint", `"opera" is not one of chrome | firefox | safari | ios | edge | random`},
			{26, "outbounds[3].tls.alpn", `a ws transport runs over HTTP/1.1: alpn is ["http/1.1"] or left out`},
			{32, "outbounds[4].tls.fingerprint", `"Chrome" is not one of chrome | firefox | safari | ios | edge | random`},
			{32, "outbounds[4].tls.alpn", `an httpupgrade transport runs over HTTP/1.1: alpn is ["http/1.1"] or left out`},
			{38, "outbounds[5].tls.alpn", `a ws transport runs over HTTP/1.1: alpn is ["http/1.1"] or left out`},
			{44, "outbounds[6].tls.alpn", `gRPC runs over HTTP/2: alpn is ["h2"] or left out`},
		}},

		{"ws headers written as a string", `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
transport = { type = "ws", headers = "User-Agent: x" }
`, []want{{5, "outbounds[0].transport.headers", "expected a table of strings, found a string"}}},

		{"ws header value written as an integer", `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
[outbounds.transport]
type = "ws"
headers.X-Count = 1
`, []want{{7, "outbounds[0].transport.headers.X-Count", "expected a string, found an integer"}}},

		{"hysteria2 max_concurrent_streams", `[[outbounds]]
tag = "a"
type = "hysteria2"
server = "example.com:443"
password = "p"
max_concurrent_streams = 0
[[outbounds]]
tag = "b"
type = "hysteria2"
server = "example.com:443"
password = "p"
max_concurrent_streams = 2147483648
[[outbounds]]
tag = "c"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
max_concurrent_streams = 8
`, []want{
			{6, "outbounds[0].max_concurrent_streams", "0 is out of range 1..2147483647"},
			{12, "outbounds[1].max_concurrent_streams", "2147483648 is out of range 1..2147483647"},
			{18, "outbounds[2].max_concurrent_streams", "a vless outbound has no max concurrent streams"},
		}},

		{"hysteria2 keys", `[[outbounds]]
tag = "a"
type = "hysteria2"
server = "example.com"
obfs = { type = "xor", password = "abc" }
up_mbps = -1
down_mbps = 4294967296
transport = { type = "tcp" }
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
tls = { fingerprint = "chrome", alpn = [] }
[[outbounds]]
tag = "b"
type = "hysteria2"
server = "192.0.2.1:0"
password = ""
obfs = { password = "long enough" }
[[outbounds]]
tag = "c"
type = "hysteria2"
server = "[2001:db8::1]:443"
password = "p"
obfs = { type = "salamander" }
address_family = "ipv7"
drain = "never"
tls = { alpn = ["h3", "h3-29"] }
`, []want{
			{1, "outbounds[0].password", "required key is missing"},
			{4, "outbounds[0].server", `bad address "example.com"`},
			{5, "outbounds[0].obfs.type", `"xor" is not one of salamander`},
			{5, "outbounds[0].obfs.password", "salamander takes a password of at least 4 bytes; this is 3"},
			{6, "outbounds[0].up_mbps", "-1 is out of range 0..2147483647"},
			{7, "outbounds[0].down_mbps", "4294967296 is out of range 0..2147483647"},
			{8, "outbounds[0].transport", "a hysteria2 outbound has no transport"},
			{9, "outbounds[0].uuid", "a hysteria2 outbound has no uuid"},
			{10, "outbounds[0].tls.fingerprint", "QUIC carries its own TLS handshake: a ClientHello fingerprint does not apply"},
			{10, "outbounds[0].tls.alpn", `Hysteria 2 runs over HTTP/3: alpn is ["h3"] or left out`},
			{14, "outbounds[1].server", `"192.0.2.1:0": port 0 is not a server port`},
			{15, "outbounds[1].password", "must not be empty"},
			{16, "outbounds[1].obfs.type", "required key is missing"},
			{22, "outbounds[2].obfs.password", "required key is missing"},
			{23, "outbounds[2].address_family", `"ipv7" is not one of auto | ipv4_only | ipv6_only | prefer_ipv4 | prefer_ipv6`},
			{24, "outbounds[2].drain", `"never" is not one of keep | close`},
			{25, "outbounds[2].tls.alpn", `Hysteria 2 runs over HTTP/3: alpn is ["h3"] or left out`},
		}},

		{"hysteria2 obfs written as a string", `[[outbounds]]
tag = "a"
type = "hysteria2"
server = "example.com:443"
password = "p"
obfs = "salamander"
`, []want{{6, "outbounds[0].obfs", "expected a table, found a string"}}},

		{"wireguard keys", `[[outbounds]]
tag = "a"
type = "wireguard"
server = "203.0.113.1:51820"
tls = {}
password = "p"
private_key = "not base64!"
peer_public_key = "AAAAAAAAAAAAAAAAAAAAAA=="
preshared_key = "AAAAAAAAAAAAAAAAAAAAAA"
addresses = []
mtu = 1400
keepalive = "1500ms"
allowed_ips = []
reserved = [1, 2]
endpoint_address_family = "any"
[[outbounds]]
tag = "b"
type = "wireguard"
endpoint = "wg.example"
private_key = "` + wgPrivate + `"
peer_public_key = "` + wgPublic + `"
addresses = ["10.7.0.2/33", "0.0.0.0", "10.7.0.2/24", "10.7.0.2", "fd00:7::2", "fe80::1%eth0", "ff02::1"]
mtu = 1000
keepalive = "-1s"
allowed_ips = ["10.0.0.0/8", "10.1.0.0/8", "bad"]
reserved = [0, 256, -1]
[[outbounds]]
tag = "c"
type = "wireguard"
endpoint = "192.0.2.1:51820"
private_key = "` + wgPrivate + `"
peer_public_key = "` + wgPeer + `"
addresses = ["10.7.0.2"]
mtu = 70000
keepalive = "65536s"
preshared_key = "` + wgPSK + `\n"
[[outbounds]]
tag = "d"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
endpoint = "192.0.2.1:51820"
up_mbps = 10
allowed_ips = ["0.0.0.0/0"]
`, []want{
			{1, "outbounds[0].endpoint", "required key is missing"},
			{4, "outbounds[0].server", "a wireguard outbound has no server"},
			{5, "outbounds[0].tls", "a wireguard outbound has no tls"},
			{6, "outbounds[0].password", "a wireguard outbound has no password"},
			{7, "outbounds[0].private_key", `the private key is not base64 (standard alphabet, padded); make one with "wg genkey"`},
			{8, "outbounds[0].peer_public_key", "the peer's public key decodes to 16 bytes; a WireGuard key is 32"},
			{9, "outbounds[0].preshared_key", `the preshared key is not base64 (standard alphabet, padded); make one with "wg genpsk"`},
			{10, "outbounds[0].addresses", "wireguard needs at least one tunnel-local address"},
			{12, "outbounds[0].keepalive", `"1500ms": a WireGuard keepalive is whole seconds from 1s to 65535s`},
			{13, "outbounds[0].allowed_ips", "no destination would go through the tunnel; leave allowed_ips out for everything"},
			{14, "outbounds[0].reserved", "takes exactly 3 bytes; this is 2"},
			{15, "outbounds[0].endpoint_address_family", `"any" is not one of auto | ipv4_only | ipv6_only | prefer_ipv4 | prefer_ipv6`},
			{19, "outbounds[1].endpoint", `bad address "wg.example"`},
			{21, "outbounds[1].peer_public_key", "this is the public key of private_key, this side's own; give the peer's"},
			{22, "outbounds[1].addresses[0]", `"10.7.0.2/33" is not an IP address or an address with a prefix length`},
			{22, "outbounds[1].addresses[1]", "0.0.0.0 cannot be a tunnel-local address"},
			{22, "outbounds[1].addresses[3]", "duplicate address 10.7.0.2"},
			{22, "outbounds[1].addresses[5]", `"fe80::1%eth0" is not an IP address or an address with a prefix length`},
			{22, "outbounds[1].addresses[6]", "ff02::1 cannot be a tunnel-local address"},
			{23, "outbounds[1].mtu", "the tunnel has an IPv6 address (fd00:7::2): IPv6 needs an MTU of at least 1280 (RFC 8200)"},
			{24, "outbounds[1].keepalive", `"-1s" must be above zero; use "" for none`},
			{25, "outbounds[1].allowed_ips[1]", "duplicate prefix 10.0.0.0/8"},
			{25, "outbounds[1].allowed_ips[2]", `"bad" is not an IP prefix`},
			{26, "outbounds[1].reserved[1]", "256 is out of range 0..255"},
			{26, "outbounds[1].reserved[2]", "-1 is out of range 0..255"},
			{34, "outbounds[2].mtu", "70000 is out of range 576..65535"},
			{35, "outbounds[2].keepalive", `"65536s": a WireGuard keepalive is whole seconds from 1s to 65535s`},
			{36, "outbounds[2].preshared_key", "the preshared key is not base64"},
			{42, "outbounds[3].endpoint", "a vless outbound has no endpoint"},
			{43, "outbounds[3].up_mbps", "a vless outbound has no up mbps"},
			{44, "outbounds[3].allowed_ips", "a vless outbound has no allowed ips"},
		}},

		{"an array inside a rule's port list", `[[rules]]
port = [[1]]
outbound = "direct"
`, []want{{2, "rules[0].port[0]", "expected an integer, found an array"}}},

		{"an array after an integer, in the second rule", `[[rules]]
outbound = "direct"
[[rules]]
outbound = "direct"
port = [1,
  2,
     [3]]
`, []want{{7, "rules[1].port[2]", "expected an integer, found an array"}}},

		{"an array in a list of inline rule tables", `rules = [
  { outbound = "direct" },
  { outbound = "direct", port = [1, [2]] },
]
`, []want{{3, "rules[1].port[1]", "expected an integer, found an array"}}},

		{"an inline table in a domain list, in an inline table in an array", `inbounds = [{ tag = "a", type = "socks", listen = "127.0.0.1:1",
  users = [{ username = "u", password = "p" },
           { username = ["u"],
             password = "p" }] }]
`, []want{{3, "inbounds[0].users[1].username", "expected a string, found an array"}}},

		{"nested arrays three deep", `[[rules]]
outbound = "direct"
domain = ["a", [
   ["b"]]]
`, []want{{3, "rules[0].domain[1]", "expected a string, found an array"}}},

		{"an inline table where a string goes", `[[rules]]
outbound = "direct"
domain = ["a",
  { b = 1 }]
`, []want{{4, "rules[0].domain[1]", "expected a string, found an inline table"}}},

		{"an empty array inside an array, after a comment", `[[rules]]
outbound = "direct"
port = [ # ports
  80,
  [],
]
`, []want{{5, "rules[0].port[1]", "expected an integer, found an array"}}},

		{"wireguard reserved written as a string", `[[outbounds]]
tag = "a"
type = "wireguard"
reserved = "AAAA"
`, []want{{4, "outbounds[0].reserved", "expected a list of integers, found a string"}}},
		{"transport type unknown, empty, or tcp with keys it does not take", `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
transport = { type = "quic", congestion = "bbr" }
[[outbounds]]
tag = "b"
type = "socks"
server = "127.0.0.1:1081"
transport = { type = "" }
[[outbounds]]
tag = "c"
type = "socks"
server = "127.0.0.1:1081"
transport = { type = "tcp", path = "/" }
[[outbounds]]
tag = "d"
type = "socks"
server = "127.0.0.1:1081"
transport = { Type = "tcp" }
`, []want{
			{5, "outbounds[0].transport.type", `unknown transport type "quic"`},
			{10, "outbounds[1].transport.type", "must not be empty"},
			{15, "outbounds[2].transport.path", "a tcp transport has no path"},
			{20, "outbounds[3].transport.Type", `unknown key "Type" (keys are case-sensitive: did you mean "type"?)`},
		}},

		{"tls table", `[[outbounds]]
tag = "a"
type = "trojan"
server = "example.com:443"
password = "p"
tls = { server_name = "", alpn = ["h2", "", "h2"], verify = "none", fingerprint = "chrome" }
[[outbounds]]
tag = "b"
type = "vless"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
tls = { server_name = "example.com:443", verify = "insecure", ca_file = "ca.pem", sni = "x" }
[[outbounds]]
tag = "c"
type = "socks"
server = "127.0.0.1:1081"
[outbounds.tls]
server_name = "[::1]"
ca_file = ""
alpn = ["` + strings.Repeat("x", 256) + `"]
fingerprint = ""
`, []want{
			{6, "outbounds[0].tls.server_name", "must not be empty"},
			{6, "outbounds[0].tls.alpn[1]", "must not be empty"},
			{6, "outbounds[0].tls.alpn[2]", `duplicate ALPN protocol "h2"`},
			{6, "outbounds[0].tls.verify", `"none" is not one of system | insecure`},
			{12, "outbounds[1].tls.sni", `unknown key "sni"`},
			{12, "outbounds[1].tls.server_name", `"example.com:443" is not a host name or an IP address`},
			{12, "outbounds[1].tls.ca_file", `a CA file has no use with verify = "insecure"`},
			{18, "outbounds[2].tls.server_name", `"[::1]" is not a host name or an IP address`},
			{19, "outbounds[2].tls.ca_file", "must not be empty"},
			{20, "outbounds[2].tls.alpn[0]", "an ALPN protocol name is at most 255 bytes (RFC 7301); this is 256"},
			{21, "outbounds[2].tls.fingerprint", `"" is not one of chrome | firefox | safari | ios | edge | random`},
		}},

		{"transport written as a string", `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
transport = "tcp"
`, []want{{5, "outbounds[0].transport", "expected a table, found a string"}}},

		{"alpn written as a string", `[[outbounds]]
tag = "a"
type = "socks"
server = "127.0.0.1:1081"
tls = { alpn = "h2" }
`, []want{{5, "outbounds[0].tls.alpn", "expected a list of strings, found a string"}}},

		{"global_padding written as a string", `[[outbounds]]
tag = "a"
type = "vmess"
server = "127.0.0.1:1081"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
global_padding = "yes"
`, []want{{6, "outbounds[0].global_padding", "expected a boolean, found a string"}}},

		{"balancer members of every proxy client type pass, others do not", `[[outbounds]]
tag = "s"
type = "socks"
server = "127.0.0.1:1081"
[[outbounds]]
tag = "h"
type = "http"
server = "127.0.0.1:3128"
[[outbounds]]
tag = "d"
type = "direct"
[[balancers]]
tag = "pool"
members = ["s", "h", "d", "block"]
`, []want{
			{14, "balancers[0].members[2]", "balancer pool: outbound d has no upstream a TCP health probe can reach"},
			{14, "balancers[0].members[3]", "balancer pool: outbound block has no upstream a TCP health probe can reach"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { wantProblems(t, tc.text, tc.want) })
	}
}

// wantProblems parses text as sy.toml and checks that it is refused with
// exactly the problems in want, in order.
func wantProblems(t *testing.T, text string, want []want) {
	t.Helper()
	s, warns, err := Parse([]byte(text), "sy.toml")
	if err == nil {
		t.Fatalf("no error; spec %+v", s)
	}
	if s != nil || warns != nil {
		t.Fatalf("a spec or warnings came back with the error")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T, want Errors: %v", err, err)
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		e := errs[i]
		if e.File != "sy.toml" || e.Line != w.line || e.Key != w.key || !strings.Contains(e.Msg, w.msg) {
			t.Errorf("problem %d:\n got  %s\n want sy.toml:%d: %s: ...%s...", i, e, w.line, w.key, w.msg)
		}
	}
}

// A problem never repeats a long value or key whole: it keeps its start
// and notes its length.
func TestLongValuesAreClipped(t *testing.T) {
	long := strings.Repeat("a", 1<<20)
	tests := []struct {
		name, text string
		want       want
	}{
		{"a listen address", "[[inbounds]]\ntag = \"in\"\ntype = \"socks\"\nlisten = \"" + long + "\"\n",
			want{4, "inbounds[0].listen", `bad address "aaaa`}},
		{"a regex", "[[rules]]\noutbound = \"direct\"\ndomain_regex = [\"(" + long + "\"]\n",
			want{3, "rules[0].domain_regex[0]", `bad regex "(aaa`}},
		{"an enum", "[log]\nlevel = \"" + long + "\"\n",
			want{2, "log.level", `"aaaa`}},
		{"an unknown key", "[log]\n" + long + " = 1\n",
			want{2, "log.aaaa", `unknown key "aaaa`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := Parse([]byte(tc.text), "sy.toml")
			var errs Errors
			if !errors.As(err, &errs) || len(errs) != 1 {
				t.Fatalf("want one problem, got %.500v", err)
			}
			e := errs[0]
			if n := len(e.Error()); n > 1000 {
				t.Errorf("the problem is %d bytes long: %.300s", n, e.Error())
			}
			if e.Line != tc.want.line || !strings.HasPrefix(e.Key, tc.want.key) || !strings.Contains(e.Msg, tc.want.msg) {
				t.Errorf("got %.500s; want line %d, key %s..., text with %s", e, tc.want.line, tc.want.key, tc.want.msg)
			}
			if !regexp.MustCompile(`…"? \(\d{7} bytes\)`).MatchString(e.Msg) {
				t.Errorf("the length of the value is not noted: %.500s", e)
			}
		})
	}
}
