package config

import (
	"errors"
	"strings"
	"testing"
)

// want is one expected problem: its line, its key, and a part of its text.
type want struct {
	line int
	key  string
	msg  string
}

const socksIn = "[[inbounds]]\ntag = \"in\"\ntype = \"socks\"\nlisten = \"127.0.0.1:1080\"\n" // lines 1-4

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []want
	}{
		{"unknown top-level table", `[log]
level = "info"

[api]
listen = "127.0.0.1:9090"
`, []want{{4, "api", `unknown key "api"`}}},

		{"unknown top-level key", `[log]
level = "info"
verbose = true
`, []want{{3, "log.verbose", `unknown key "verbose"`}}},

		{"unknown bare key at the top", `
colour = "blue"
`, []want{{2, "colour", `unknown key "colour"`}}},

		{"sections not implemented yet", `[dns]
servers = ["udp://1.1.1.1:53"]
[[groups]]
tag = "proxy"
[[groups]]
tag = "auto"
`, []want{
			{1, "dns", `unknown key "dns"`},
			{3, "groups[0]", `unknown key "groups"`},
			{5, "groups[1]", `unknown key "groups"`},
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
tag = "v"
type = "vmess"
server = "example.com:443"
uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"

[[rules]]
outbound = "v"
`, []want{{7, "outbounds[1].type", `unknown outbound type "vmess"`}}},

		{"every other outbound type is unknown", `[[outbounds]]
tag = "a"
type = "socks"
[[outbounds]]
tag = "b"
type = "wireguard"
[[outbounds]]
tag = "c"
type = "Direct"
`, []want{
			{3, "outbounds[0].type", `unknown outbound type "socks"`},
			{6, "outbounds[1].type", `unknown outbound type "wireguard"`},
			{9, "outbounds[2].type", `unknown outbound type "Direct"`},
		}},

		{"unknown inbound type, its own keys not reported", `[[inbounds]]
tag = "tun-in"
type = "tun"
name = "sy0"
mtu = 9000
`, []want{{3, "inbounds[0].type", `unknown inbound type "tun"`}}},

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
tag = "ss"
type = "shadowsocks"
server = "192.0.2.1:8388"
[[outbounds]]
tag = "wg"
type = "wireguard"
[[outbounds]]
tag = "typeless"
[[balancers]]
tag = "pool"
members = ["ss", "wg", "typeless"]
`, []want{
			{3, "outbounds[0].type", `unknown outbound type "shadowsocks"`},
			{7, "outbounds[1].type", `unknown outbound type "wireguard"`},
			{8, "outbounds[2].type", "required key is missing"},
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
[route]
final = "x"
`, []want{
			{2, "rules[0].outbound", `unknown outbound "nowhere"`},
			{4, "log.level", `"loud" is not one of`},
			{7, "outbounds[0].type", `unknown outbound type "trojan"`},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.text), "sy.toml")
			if err == nil {
				t.Fatalf("no error; spec %+v", s)
			}
			if s != nil {
				t.Fatalf("a spec came back with the error")
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want Errors: %v", err, err)
			}
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%v", len(errs), len(tc.want), err)
			}
			for i, w := range tc.want {
				e := errs[i]
				if e.File != "sy.toml" || e.Line != w.line || e.Key != w.key || !strings.Contains(e.Msg, w.msg) {
					t.Errorf("problem %d:\n got  %s\n want sy.toml:%d: %s: ...%s...", i, e, w.line, w.key, w.msg)
				}
			}
		})
	}
}
