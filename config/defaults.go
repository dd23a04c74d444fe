package config

import (
	"net/netip"
	"time"

	"switchyard/spec"
)

// Every default the loader fills in, and every closed set of values it
// accepts, is here.

const (
	defaultLogLevel           = "info"
	defaultLogFormat          = "text"
	defaultConnectTimeout     = 10 * time.Second
	defaultMaxConcurrentDials = 64
	defaultReloadDrain        = spec.DrainKeep
	defaultAddressFamily      = "auto"
	defaultTransport          = "tcp"
	defaultTLSVerify          = "system"
	defaultRealityFingerprint = "chrome"
	defaultVMessSecurity      = "auto"
	defaultGlobalPadding      = true
	defaultFinal              = tagDirect
	defaultBalancerStrategy   = "failover"
	defaultProbeInterval      = 30 * time.Second
	defaultProbeTimeout       = 5 * time.Second

	// Groups. A urltest group keeps its incumbent while the best member is
	// less than the tolerance faster (the group manager makes it at least
	// 1ms).
	defaultTolerance = 50 * time.Millisecond

	// [health].
	defaultTCPCheckMethod = "HEAD"
	defaultCheckInterval  = 30 * time.Second
	defaultCheckTimeout   = 5 * time.Second
	defaultIdleTimeout    = 30 * time.Minute

	// [dns]. The cache keeps an answer for its TTL clamped to
	// [min_ttl, max_ttl]; its size and a fake IP pool's are bounded so that
	// a typo cannot ask for gigabytes.
	defaultDNSServer    = "system" // servers, when neither it nor the pair is written
	defaultDNSBootstrap = "system"
	defaultDNSCacheSize = 4096
	maxDNSCacheSize     = 1_000_000
	defaultDNSMinTTL    = 0
	defaultDNSMaxTTL    = 24 * time.Hour
	defaultDNSTimeout   = 5 * time.Second
	defaultDoHPath      = "/dns-query" // an https:// server URL without a path
	defaultBlockWith    = "nxdomain"
	defaultFakeIPSize   = 65536 // clamped to the addresses of the ranges
	maxFakeIPSize       = 1_000_000
	// A fake IP range holds at least 4 addresses.
	maxFakeIPv4Bits = 30
	maxFakeIPv6Bits = 126

	// defaultStateFile is the state file of a configuration file that does
	// not name one, beside it. Text that comes from no file (Parse, the
	// embedded default) keeps its state in memory.
	defaultStateFile = "switchyard.db"

	// Inbounds: one deadline over a connection's whole handshake, and the
	// connections in their handshake at once (the inbounds' own defaults;
	// inbound/internal/serve says why).
	defaultHandshakeTimeout = 10 * time.Second
	defaultMaxHandshakes    = 256
	maxMaxHandshakes        = 1 << 20

	// Transports.
	defaultHTTPPath        = "/" // ws and httpupgrade
	defaultEarlyDataHeader = "Sec-WebSocket-Protocol"
	defaultGRPCServiceName = "grpc"
	defaultGRPCMode        = "gun"

	// Hysteria 2: the TCP streams a client keeps open at once on its QUIC
	// connection, the number a Hysteria 2 server accepts by default (its
	// QUIC MaxIncomingStreams); beyond it a flow waits for a stream to
	// close instead of being refused by the server.
	defaultHysteria2MaxStreams = 1024

	// WireGuard. The MTU is the tunnel's, inside the encapsulation: 576 is
	// the least IPv4 has every host accept (RFC 791); a tunnel with an IPv6
	// address needs 1280 (RFC 8200), and the loader refuses less for it.
	defaultWireGuardMTU = 1408
	minWireGuardMTU     = 576
	minIPv6MTU          = 1280
	maxWireGuardMTU     = 65535
)

// wireGuardKeySize is the length of every WireGuard key (Curve25519 keys
// and the preshared key).
const wireGuardKeySize = 32

// wireGuardReservedSize is the number of reserved bytes of a WireGuard
// message header that some servers use to tell clients apart.
const wireGuardReservedSize = 3

// maxWireGuardKeepalive is the longest persistent keepalive: the protocol
// counts it in seconds in 16 bits.
const maxWireGuardKeepalive = 65535 * time.Second

// salamanderMinPassword is the shortest salamander obfuscation password
// Hysteria 2 accepts.
const salamanderMinPassword = 4

// The outbound tags that always exist.
const (
	tagDirect = "direct"
	tagBlock  = "block"
)

// defaultInterrupt is the interrupt value of a group that does not set it:
// a selector's switch is a user's choice, and the flows of the old choice
// are closed; an automatic policy's switch leaves them.
func defaultInterrupt(policy string) bool { return policy == "selector" }

// defaultInboundUDP is the udp value of an inbound that does not set it:
// SOCKS5 UDP ASSOCIATE is on for socks and mixed; HTTP has no UDP.
func defaultInboundUDP(typ string) bool { return typ == "socks" || typ == "mixed" }

// defaultMaxUDPAssociations is how many SOCKS5 UDP associations a socks or
// mixed inbound serves at once. An association holds a relay socket, its
// control connection and up to 64 sub-links with their own sockets, so
// without a cap one client could open associations until the process runs
// out of descriptors and every other flow fails. 1024 is far beyond what the
// devices of a home or an office use at once (an application holds one
// association per UDP socket it proxies: a few per browser or game) and
// keeps the idle cost bounded (a few KiB and two goroutines each), while
// leaving most of a common 65,536-descriptor limit to TCP flows.
const defaultMaxUDPAssociations = 1024

// defaultOutboundUDP is the udp value of an outbound that does not set it:
// on wherever the outbound carries datagrams (see noUDP).
func defaultOutboundUDP(typ, transport string) bool { return noUDP(typ, transport) == "" }

// implicitOutbounds are appended, in this order, for each tag the file does
// not declare.
var implicitOutbounds = []spec.Outbound{
	{Tag: tagDirect, Type: "direct", AddressFamily: defaultAddressFamily, UDP: true},
	{Tag: tagBlock, Type: "block", UDP: true},
}

var (
	logLevels       = []string{"trace", "debug", "info", "warn", "error"}
	logFormats      = []string{"text", "json"}
	drains          = []string{string(spec.DrainKeep), string(spec.DrainClose)}
	inboundTypes    = []string{"socks", "http", "mixed", "tun"}
	addressFamilies = []string{"auto", "ipv4_only", "ipv6_only", "prefer_ipv4", "prefer_ipv6"}
	networks        = []string{"tcp", "udp"}
	protocols       = []string{"tls", "http", "quic", "dns"}
	strategies      = []string{"failover", "round_robin"}
	checkMethods    = []string{"HEAD", "GET"}
	dnsActions      = []string{"block"}
	blockWiths      = []string{"nxdomain", "empty"}

	// dnsPorts are the DNS server URL schemes and the port of each when the
	// URL gives none.
	dnsPorts = map[string]uint16{"udp": 53, "tcp": 53, "tls": 853, "https": 443}

	// groupPolicies are the accepted group policies: every one CONFIG.md
	// documents.
	groupPolicies = []string{"selector", "urltest", "fallback", "loadbalance", "score"}

	// everyGroupKeys are the keys every policy takes; groupKeys are the
	// others each policy takes. check_url is taken by a selector and
	// ignored there, with a warning.
	everyGroupKeys = []string{"tag", "policy", "members", "final", "interrupt", "use", "check_url", "idle_timeout"}
	groupKeys      = map[string][]string{
		"selector":    {"default"},
		"urltest":     {"tolerance"},
		"fallback":    {},
		"loadbalance": {},
		// score is not configurable: no tolerance (its hold margin is the
		// scorer's own), no default.
		"score": {},
	}

	// The [health] defaults: probe with an HTTP HEAD of a URL that answers
	// 204, and with one DNS query for UDP.
	defaultTCPCheckURLs = []string{"https://www.gstatic.com/generate_204"}
	defaultUDPCheckDNS  = []string{"1.1.1.1:53"}

	// probeableTypes are the canonical outbound types with an upstream a
	// balancer's TCP health probe can reach: the proxy clients over a
	// stream. direct and block have no upstream; UDP-based clients
	// (hysteria2, wireguard) would be marked down for ever by a TCP connect.
	probeableTypes = []string{"socks", "http", "shadowsocks", "trojan", "vless", "vmess"}

	// outboundTypes maps every accepted outbound type, aliases included, to
	// its canonical name.
	outboundTypes = map[string]string{
		"direct":      "direct",
		"freedom":     "direct",
		"block":       "block",
		"blackhole":   "block",
		"socks":       "socks",
		"http":        "http",
		"shadowsocks": "shadowsocks",
		"trojan":      "trojan",
		"vless":       "vless",
		"vmess":       "vmess",
		"hysteria2":   "hysteria2",
		"wireguard":   "wireguard",
		"dns":         "dns",
	}

	// everyOutboundKeys are the keys every outbound type takes;
	// outboundKeys are the others each canonical type takes.
	everyOutboundKeys = []string{"tag", "type", "drain", "udp"}
	outboundKeys      = map[string][]string{
		"direct":      {"address_family"},
		"block":       {},
		"socks":       {"address_family", "server", "username", "password", "transport", "tls"},
		"http":        {"address_family", "server", "username", "password", "transport", "tls"},
		"shadowsocks": {"address_family", "server", "method", "password", "transport", "tls"},
		"trojan":      {"address_family", "server", "password", "transport", "tls"},
		"vless":       {"address_family", "server", "uuid", "flow", "packet_encoding", "transport", "tls"},
		"vmess":       {"address_family", "server", "uuid", "security", "global_padding", "packet_encoding", "transport", "tls"},
		"hysteria2":   {"address_family", "server", "password", "obfs", "up_mbps", "down_mbps", "max_concurrent_streams", "tls"},
		"wireguard": {"address_family", "endpoint", "endpoint_address_family", "private_key", "peer_public_key",
			"preshared_key", "addresses", "mtu", "keepalive", "allowed_ips", "reserved"},
		"dns": {},
	}

	// transportKeys are the keys each transport type takes beside "type".
	transportKeys = map[string][]string{
		"tcp":         {},
		"ws":          {"path", "host", "headers", "max_early_data", "early_data_header"},
		"httpupgrade": {"path", "host"},
		"grpc":        {"service_name", "authority", "mode"},
		"xhttp":       {"path", "host", "headers", "mode", "x_padding_bytes", "sc_max_each_post_bytes", "sc_min_posts_interval_ms", "no_grpc_header", "xmux", "download"},
	}

	// transportALPN is the one ALPN protocol a transport runs on under TLS:
	// the HTTP version it speaks. It is filled in when the tls table leaves
	// alpn out, and any other written list is refused.
	transportALPN = map[string]string{
		"ws":          "http/1.1",
		"httpupgrade": "http/1.1",
		"grpc":        "h2",
	}

	// hysteria2ALPN is the ALPN of a Hysteria 2 client that does not set
	// one.
	hysteria2ALPN = []string{"h3"}

	// wsHandshakeHeaders are the request headers the WebSocket handshake
	// writes itself (lowercase); ws headers cannot set them.
	wsHandshakeHeaders = []string{"connection", "upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions"}

	// defaultAllowedIPs are the destinations a WireGuard tunnel carries when
	// allowed_ips is left out: everything.
	defaultAllowedIPs = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}

	// shadowsocksMethods are the accepted ciphers. The 2022 ones take
	// base64 keys of ss2022KeyLengths bytes instead of a password.
	shadowsocksMethods = []string{
		"aes-128-gcm", "aes-256-gcm", "chacha20-ietf-poly1305",
		"2022-blake3-aes-128-gcm", "2022-blake3-aes-256-gcm", "2022-blake3-chacha20-poly1305",
	}
	ss2022KeyLengths = map[string]int{
		"2022-blake3-aes-128-gcm":       16,
		"2022-blake3-aes-256-gcm":       32,
		"2022-blake3-chacha20-poly1305": 32,
	}
	// ss2022SingleKey are the 2022 methods without identity headers: they
	// take the user key alone.
	ss2022SingleKey = []string{"2022-blake3-chacha20-poly1305"}

	vmessSecurities = []string{"auto", "aes-128-gcm", "chacha20-poly1305", "none", "zero"}
	packetEncodings = []string{"", "xudp"}
	tlsVerifyModes  = []string{"system", "insecure"}
	tlsFingerprints = []string{"chrome", "firefox", "safari", "ios", "edge", "random"}
	grpcModes       = []string{"gun", "multi"}
	obfsTypes       = []string{"salamander"}

	// The accepted VLESS flows: the plain one and Vision.
	vlessFlows     = []string{"", "xtls-rprx-vision"}
	transportTypes = []string{"tcp", "ws", "grpc", "httpupgrade", "xhttp"}
)
