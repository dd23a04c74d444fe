// Package spec is the validated, immutable description of a running system.
// The config loader lowers a file into a Spec; the supervisor builds from it
// and, on reload, compares the parts of two Specs to decide what to rebuild.
// Values are never mutated after lowering: compare parts with Equal.
package spec

import (
	"net/netip"
	"reflect"
	"time"
)

// Spec is everything one apply builds.
type Spec struct {
	Log       Log
	Socket    Socket
	Dial      Dial
	Reload    Reload
	Inbounds  []Inbound
	Outbounds []Outbound // provider nodes included, after the file's own
	Providers []Provider
	Balancers []Balancer
	Groups    []Group
	DNS       *DNS // nil: the system resolver for everything, no DNS service
	Health    Health
	Warmup    Warmup
	State     State
	API       *API // nil: no API
	Route     Route
	Rules     []Rule
	RuleSets  []RuleSet
}

// Equal reports whether two parts of a spec (two Outbounds, two Inbounds, two
// Specs...) describe the same thing.
func Equal[T any](a, b T) bool { return reflect.DeepEqual(a, b) }

type Log struct {
	Level  string // trace | debug | info | warn | error
	Format string // text | json
}

// Socket is the socket policy applied to every socket toward the network.
type Socket struct {
	Mark             uint32
	Interface        string
	BindAddresses    []netip.Addr // at most one per family
	TCPKeepAliveIdle time.Duration
}

type Dial struct {
	ConnectTimeout     time.Duration // one TCP connect attempt; default 10s
	MaxConcurrentDials int           // default 64
}

// Drain is what a changed or removed outbound's live flows get.
type Drain string

const (
	DrainKeep  Drain = "keep"
	DrainClose Drain = "close"
)

type Reload struct {
	Drain Drain
}

// PreconnectAuto is how many nodes preconnect = "auto" warms at most.
const PreconnectAuto = 8

// Warmup is what the warm-up keeps ready (package warm): the startup
// preconnect's node count (0: off; "auto" is PreconnectAuto), the UDP warm
// set's per-group depth N (0: off), and whether every Selector's TCP
// choice is pinned warm.
type Warmup struct {
	Preconnect  int
	UDPWarmSet  int
	SelectorPin bool
}

// User is one account of an inbound. UpMbps and DownMbps pace the user's
// flows (uploads toward their destinations, downloads from them) in megabits
// per second; 0 leaves that direction unpaced. A user is one name across
// every inbound, so its rates are the same wherever it is configured.
type User struct {
	Username string
	Password string
	UpMbps   int
	DownMbps int
}

type Inbound struct {
	Tag    string
	Type   string         // socks | http | mixed | tun
	Listen netip.AddrPort // not on tun
	UDP    bool
	Users  []User
	Sniff  bool
	SOCKS4 bool // socks, mixed: accept SOCKS4/4a beside Users (always accepted without Users)
	// HandshakeTimeout bounds a connection's whole handshake, from its
	// accept; MaxHandshakes bounds the connections in it at once.
	HandshakeTimeout time.Duration
	MaxHandshakes    int
	// MaxUDPAssociations caps the SOCKS5 UDP associations served at once
	// (socks and mixed), the UDP associations (local endpoints) of a tun;
	// 0 is no cap.
	MaxUDPAssociations int
	// TUN is the device of a tun inbound; nil on every other type.
	TUN *TUN
}

// TUN is a tun inbound's device and what it installs.
type TUN struct {
	Name       string         // the device's name
	Addresses  []netip.Prefix // its addresses, each in its prefix
	MTU        int
	DNSHijack  bool          // port 53 of any address goes to the DNS service
	UDPTimeout time.Duration // an association idle this long ends
	// AutoRoute installs routes into the device and the policy rules that
	// send everything there except the process's own marked sockets
	// (Spec.Socket.Mark), loopback and the device's range.
	AutoRoute bool
	// StrictRoute (with AutoRoute) blocks what would bypass the device:
	// its rules stay while the device is missing, at start, at stop and
	// across a reload that recreates it.
	StrictRoute  bool
	RouteAddress []netip.Prefix // auto_route: only these (empty: everything)
	RouteExclude []netip.Prefix // auto_route: never these
}

// Outbound is one outbound. Type is the canonical name ("direct", "block",
// "socks", "http", "shadowsocks", "trojan", "vless", "vmess", "hysteria2",
// "wireguard", "dns"); the loader maps aliases ("freedom", "blackhole"). A
// "dns" outbound has only its tag (and Drain, UDP): it is the DNS service of
// Spec.DNS as a route target, and the loader refuses it without a [dns].
type Outbound struct {
	Tag  string
	Type string
	// AddressFamily orders the addresses of the destination (direct) or of
	// the proxy server (proxy clients).
	AddressFamily string // auto | ipv4_only | ipv6_only | prefer_ipv4 | prefer_ipv6
	Drain         Drain  // "" = [reload].drain
	UDP           bool   // false refuses UDP even where the protocol has it

	// Proxy clients.
	Server         string // host:port of the proxy server
	Username       string // socks, http
	Password       string // socks, http, shadowsocks, trojan
	Method         string // shadowsocks
	UUID           string // vless, vmess: canonical lowercase 8-4-4-4-12 form
	Flow           string // vless: "" | xtls-rprx-vision
	PacketEncoding string // vless, vmess: "" | xudp
	Security       string // vmess: auto | aes-128-gcm | chacha20-poly1305 | none | zero
	GlobalPadding  bool   // vmess
	Transport      Transport
	TLS            *TLS // nil: no TLS layer

	// Hysteria 2 (also Server, Password, TLS, AddressFamily).
	Obfs     *Obfs // nil: no obfuscation
	UpMbps   int   // 0: BBR; > 0: Brutal at this send rate
	DownMbps int
	// MaxConcurrentStreams caps the TCP streams open at once on the QUIC
	// connection; a flow beyond it waits for one to close. 0: no cap.
	MaxConcurrentStreams int

	// WireGuard.
	Endpoint              string // host:port of the peer
	EndpointAddressFamily string // auto | ipv4_only | ipv6_only | prefer_ipv4 | prefer_ipv6
	PrivateKey            string // base64, 32 bytes
	PeerPublicKey         string // base64, 32 bytes
	PresharedKey          string // base64, 32 bytes; "" = none
	Addresses             []netip.Prefix
	MTU                   int           // default 1408
	Keepalive             time.Duration // persistent keepalive; 0 = off
	AllowedIPs            []netip.Prefix
	Reserved              []byte // nil or 3 bytes
}

// Obfs is a Hysteria 2 obfuscation layer.
type Obfs struct {
	Type     string // salamander
	Password string
}

// Transport is the stream under a proxy client. Type "" and "tcp" are the
// plain TCP connection.
type Transport struct {
	Type string // tcp | ws | grpc | httpupgrade | xhttp

	// ws, httpupgrade and xhttp
	Path    string
	Host    string            // defaults to tls.server_name, else the server's host
	Headers map[string]string // ws, xhttp: extra request headers
	// ws early data: the first MaxEarlyData bytes of the flow ride in the
	// handshake, in EarlyDataHeader (default Sec-WebSocket-Protocol).
	MaxEarlyData    int
	EarlyDataHeader string

	// grpc
	ServiceName string
	Authority   string // defaults to tls.server_name, else the server's host
	Mode        string // grpc: gun | multi; xhttp: auto | stream-one | stream-up | packet-up

	// xhttp: the x_padding of every request is XPaddingMin..XPaddingMax
	// bytes; a packet-up POST carries at most MaxEachPostBytes (drawn up
	// to MaxEachPostBytesMax once per flow, when that is set) and follows
	// the one before by MinPostsInterval or more (drawn up to
	// MinPostsIntervalMax for each POST, when set).
	XPaddingMin, XPaddingMax int
	MaxEachPostBytes         int
	MaxEachPostBytesMax      int
	MinPostsInterval         time.Duration
	MinPostsIntervalMax      time.Duration
	// xhttp: NoGRPCHeader leaves out the "Content-Type: application/grpc"
	// of a streamed POST (stream-one, stream-up).
	NoGRPCHeader bool
	// xhttp over HTTP/2: how flows share connections; nil is Xray's
	// client default (one flow at a time on a connection, 600..900
	// requests, 1800..3000 s).
	XMux *XMux
	// xhttp: Download, when set, carries the download (the GET) over a
	// path of its own; the upload goes to Server as without it.
	Download *XHTTPDownload
}

// XHTTPDownload is the path of an xhttp flow's download when it is not
// the upload's (Xray's downloadSettings): its own server, TLS layer and
// request shape, for the same session. The loader fills in what the table
// leaves out from the outbound: its server, its tls table, and its
// transport's path, host, headers, padding and xmux.
type XHTTPDownload struct {
	Server                   string
	TLS                      *TLS // nil: none
	Path, Host               string
	Headers                  map[string]string
	XPaddingMin, XPaddingMax int
	XMux                     *XMux
}

// XMux bounds how an xhttp client's flows share its HTTP/2 connections
// (Xray's xmux). Every bound is a range [MIN, MAX] drawn at random: the
// first two once per outbound, the others once per connection. 0 is no
// bound. MaxConcurrency and MaxConnections exclude each other.
type XMux struct {
	MaxConcurrency   [2]int64 // flows at once on a connection
	MaxConnections   [2]int64 // connections opened before flows share them
	CMaxReuseTimes   [2]int64 // flows a connection carries in all
	HMaxRequestTimes [2]int64 // HTTP requests a connection carries
	HMaxReusableSecs [2]int64 // seconds a connection takes new flows
	// KeepAlive pings an HTTP/2 connection after this long without a
	// frame; 0 is the transport's default, below 0 no ping.
	KeepAlive time.Duration
}

// TLS is the TLS layer over a proxy client's transport.
type TLS struct {
	ServerName string   // defaults to the server's host
	ALPN       []string // nil: none
	Insecure   bool     // verify = "insecure": no certificate or name check
	CAFile     string   // absolute path of a PEM bundle added to the system roots; "" = none
	// Fingerprint shapes the ClientHello like a browser's: chrome | firefox |
	// safari | ios | edge | random; "" = Go's own (chrome under REALITY).
	Fingerprint string
	// Reality makes the handshake a REALITY client's; nil: plain TLS.
	Reality *Reality
}

// Reality is the REALITY part of a tls table: the server's X25519 public
// key, one of its short ids, and the path the client browses when the
// server answers as the target site. The server name and the fingerprint
// are the TLS table's.
type Reality struct {
	PublicKey [32]byte
	ShortID   [8]byte // the hex short id, zero-padded on the right
	SpiderX   string  // a path from "/"; "" = "/"
}

// Provider is one [[providers]] table as loaded: its nodes are outbounds
// of the spec (Spec.Outbounds), named here in the provider's order.
type Provider struct {
	Tag   string
	Path  string   // absolute path of the file read; "" for a url provider
	Nodes []string // outbound tags
	// A url provider: its content is downloaded from URL through Via (an
	// outbound or group tag) every Interval (0: at start and on demand
	// only), and kept at CachePath, absolute, which the loader reads.
	URL       string
	Interval  time.Duration
	Via       string
	CachePath string
}

// Balancer is a probe-driven choice among outbounds with a TCP upstream.
type Balancer struct {
	Tag           string
	Members       []string // outbound tags, in order
	Strategy      string   // failover | round_robin
	ProbeInterval time.Duration
	ProbeTimeout  time.Duration
}

// Group is one [[groups]] table: a chooser among outbounds, balancers and
// other groups. The loader fills every default.
type Group struct {
	Tag     string
	Policy  string   // selector | urltest | fallback | loadbalance | score
	Members []string // outbound, balancer or group tags, in order
	Default string   // selector: the initial choice; "" = the first member
	Final   string   // where flows go when no member is eligible; "" = refused
	// Interrupt closes the flows through the old choice when the choice
	// changes (selector default true; automatic policies default false).
	Interrupt bool
	Tolerance time.Duration // urltest hysteresis (effective minimum 1ms)
	CheckURL  string        // urltest/fallback/loadbalance: per-group TCP URL probe; "" = none
	// IdleTimeout: probing of the group's members sleeps after this long
	// without a real selection (0 = Health.IdleTimeout).
	IdleTimeout time.Duration
}

// DNS is the [dns] table. Servers, PreProxy, ThroughProxy and a rule's
// Servers are server URLs: "system", "udp://host:port", "tcp://host:port",
// "tls://host:port" (DoT; a name in the host is the TLS server name too),
// "https://host[:port]/path" (DoH). A host given by name is resolved by
// Bootstrap.
type DNS struct {
	// Servers is one resolver for everything; or PreProxy (proxy servers
	// and endpoints, asked directly) and ThroughProxy (destinations this
	// process connects to itself, asked through the route table). The
	// loader allows Servers or the pair, not both, and fills Servers with
	// "system" when the file gives neither. It writes URLs in one form: the
	// scheme's port filled in (53, 853; an https:// URL keeps a port only
	// other than 443), a name in lower case, an IP canonical, an empty
	// https:// path as /dns-query.
	Servers      []string
	PreProxy     []string
	ThroughProxy []string
	Serve        bool   // answer port-53 flows in-process (route target "dns")
	Bootstrap    string // "system" (default) or one udp:// or tcp:// URL with an IP
	// Cache bounds; the loader fills the defaults.
	CacheSize int           // entries; default 4096
	MinTTL    time.Duration // default 0
	MaxTTL    time.Duration // default 24h
	Timeout   time.Duration // per query and server; default 5s
	Rules     []DNSRule
	FakeIP    *FakeIP // nil: no fake IPs
}

// DNSRule picks the resolver of a question by its name: the first rule a
// name matches wins, else the default resolver.
type DNSRule struct {
	Domain        []string
	DomainSuffix  []string
	DomainKeyword []string
	DomainRegex   []string
	RuleSet       []RuleSet // names the domain rules of one of these sets match
	Servers       []string  // the resolver for the matching names
	Action        string    // "" (ask Servers) | "block"
	// BlockWith is how a block rule answers: "nxdomain" (default) or
	// "empty" (NOERROR with no records).
	BlockWith string
}

// FakeIP hands out addresses from its ranges as answers for names whose
// flows go through a proxy, so that the flow carries the name.
type FakeIP struct {
	IPv4   netip.Prefix // invalid: none
	IPv6   netip.Prefix // invalid: none
	Filter []string     // domain suffixes that get real answers
	Size   int          // mappings kept; default 65536
}

// Health is the process-wide probing of every leaf a group may choose.
type Health struct {
	TCPCheckURLs   []string // [] = a raw TCP connect to the node's server
	TCPCheckMethod string   // HEAD | GET
	UDPCheckDNS    []string // host:port DNS servers; [] disables UDP probing
	CheckInterval  time.Duration
	CheckTimeout   time.Duration
	IdleTimeout    time.Duration
}

// State is the persistent state file (selector choices, last real delay).
type State struct {
	Path string // "" = memory only
}

// API is the [api] table: the Clash-compatible HTTP controller.
type API struct {
	Listen string // host:port
	// Secret is the bearer token every request must carry; "" accepts
	// requests without one (the loader allows that on loopback only).
	Secret string
	// ExternalUI is an absolute folder served at /ui/; "" = none.
	ExternalUI string
	// AllowOrigins are the origins allowed cross-origin besides loopback
	// ones, as written ("https://example.com").
	AllowOrigins []string
}

type Route struct {
	Final string // tag; default "direct"
	// Mode is how flows route: "rule" (by the rules, the default),
	// "global" (all to the GLOBAL selector's choice) or "direct".
	Mode string
	// GeoIPPath is the MaxMind-format database geoip rules read
	// (absolute); "" when none is given.
	GeoIPPath string
}

type PortRange struct{ Lo, Hi uint16 }

// Rule is one [[rules]] table. Empty keys match everything; all non-empty keys
// must match (AND); the values of one key are alternatives (OR).
type Rule struct {
	Inbound       []string
	Network       string // "" | tcp | udp
	Domain        []string
	DomainSuffix  []string
	DomainKeyword []string
	DomainRegex   []string
	IPCIDR        []netip.Prefix
	SourceIPCIDR  []netip.Prefix
	Port          []uint16
	PortRange     []PortRange
	User          []string
	Protocol      []string // tls | http | quic | dns
	// RuleSet: the flow matches one of these rule sets (any of its rules).
	RuleSet []RuleSet
	// GeoIP: the destination IP is in one of these countries (ISO codes,
	// upper case) by the database at GeoIPPath ([route].geoip_path).
	GeoIP     []string
	GeoIPPath string
	Outbound  string
}

// RuleSet is a [[rule_sets]] entry: a local file in a format, or a
// download kept at CachePath. The compiled form is loaded by path and
// format (ruleset.Load), and reused while the file's content is unchanged.
type RuleSet struct {
	Tag string
	// Path is the file the rules are read from, absolute: a url rule set's
	// CachePath once downloaded, "" before its first download (it then
	// matches nothing).
	Path   string
	Format string // srs | source | clash-domain | clash-ipcidr | clash-classical
	// Sum is the SHA-256 of the content read at load (hex; "" when none
	// was): a changed file is a changed spec.
	Sum string
	// A url rule set: downloaded as a url provider is (see Provider).
	URL       string
	Interval  time.Duration
	Via       string
	CachePath string
}
