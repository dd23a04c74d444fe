package config

import (
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
	defaultOutboundUDP        = true
	defaultFinal              = tagDirect
	defaultBalancerStrategy   = "failover"
	defaultProbeInterval      = 30 * time.Second
	defaultProbeTimeout       = 5 * time.Second
)

// The outbound tags that always exist.
const (
	tagDirect = "direct"
	tagBlock  = "block"
)

// defaultInboundUDP is the udp value of an inbound that does not set it:
// SOCKS5 UDP ASSOCIATE is on for socks and mixed; HTTP has no UDP.
func defaultInboundUDP(typ string) bool { return typ == "socks" || typ == "mixed" }

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
	inboundTypes    = []string{"socks", "http", "mixed"}
	addressFamilies = []string{"auto", "ipv4_only", "ipv6_only", "prefer_ipv4", "prefer_ipv6"}
	networks        = []string{"tcp", "udp"}
	protocols       = []string{"tls", "http", "quic", "dns"}
	strategies      = []string{"failover", "round_robin"}

	// probeableTypes are the canonical outbound types with an upstream a
	// balancer's TCP health probe can reach: the proxy clients over a
	// stream. direct and block have no upstream; UDP-based clients would be
	// marked down for ever by a TCP connect.
	probeableTypes = []string{"socks", "http", "shadowsocks", "trojan", "vless", "vmess"}

	// outboundTypes maps every accepted outbound type, aliases included, to
	// its canonical name.
	outboundTypes = map[string]string{
		"direct":    "direct",
		"freedom":   "direct",
		"block":     "block",
		"blackhole": "block",
	}
)
