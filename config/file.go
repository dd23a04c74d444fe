package config

// The file structs mirror the TOML schema: one struct per table, decoded
// strictly. A pointer field distinguishes "not written" from a zero value, so
// that defaults can be filled in one place (defaults.go) and a written empty
// value can be refused. Integers are decoded as int64 and range-checked while
// lowering, so that an out-of-range value is reported with its key like any
// other problem instead of stopping the decoder.

type fileConfig struct {
	Log       fileLog        `toml:"log"`
	Socket    fileSocket     `toml:"socket"`
	Dial      fileDial       `toml:"dial"`
	Reload    fileReload     `toml:"reload"`
	Inbounds  []fileInbound  `toml:"inbounds"`
	Outbounds []fileOutbound `toml:"outbounds"`
	Balancers []fileBalancer `toml:"balancers"`
	Groups    []fileGroup    `toml:"groups"`
	Providers []fileProvider `toml:"providers"`
	DNS       *fileDNS       `toml:"dns"`
	Health    fileHealth     `toml:"health"`
	Warmup    fileWarmup     `toml:"warmup"`
	State     fileState      `toml:"state"`
	API       *fileAPI       `toml:"api"`
	Route     fileRoute      `toml:"route"`
	Rules     []fileRule     `toml:"rules"`
	RuleSets  []fileRuleSet  `toml:"rule_sets"`
}

type fileLog struct {
	Level  *string `toml:"level"`
	Format *string `toml:"format"`
}

type fileSocket struct {
	Mark             int64    `toml:"mark"`
	Interface        string   `toml:"interface"`
	BindAddress      []string `toml:"bind_address"`
	TCPKeepAliveIdle string   `toml:"tcp_keepalive_idle"`
}

type fileDial struct {
	ConnectTimeout     *string `toml:"connect_timeout"`
	MaxConcurrentDials *int64  `toml:"max_concurrent_dials"`
}

// fileWarmup is [warmup]. preconnect takes the string "auto" or an
// integer: it is decoded as whatever was written and checked while
// lowering.
type fileWarmup struct {
	Preconnect  any    `toml:"preconnect"`
	UDPWarmSet  *int64 `toml:"udp_warm_set"`
	SelectorPin *bool  `toml:"selector_pin"`
}

type fileReload struct {
	Drain *string `toml:"drain"`
}

type fileInbound struct {
	Tag    *string    `toml:"tag"`
	Type   *string    `toml:"type"`
	Listen *string    `toml:"listen"`
	UDP    *bool      `toml:"udp"`
	Users  []fileUser `toml:"users"`
	Sniff  bool       `toml:"sniff"`
	SOCKS4 bool       `toml:"socks4"`

	HandshakeTimeout *string `toml:"handshake_timeout"`
	MaxHandshakes    *int64  `toml:"max_handshakes"`

	MaxUDPAssociations *int64 `toml:"max_udp_associations"`

	// tun
	Name                *string  `toml:"name"`
	Addresses           []string `toml:"addresses"`
	MTU                 *int64   `toml:"mtu"`
	AutoRoute           *bool    `toml:"auto_route"`
	StrictRoute         *bool    `toml:"strict_route"`
	RouteAddress        []string `toml:"route_address"`
	RouteExcludeAddress []string `toml:"route_exclude_address"`
	DNSHijack           *bool    `toml:"dns_hijack"`
	UDPTimeout          *string  `toml:"udp_timeout"`
}

type fileUser struct {
	Username *string `toml:"username"`
	Password *string `toml:"password"`
	UpMbps   *int64  `toml:"up_mbps"`
	DownMbps *int64  `toml:"down_mbps"`
}

// fileOutbound holds the keys of every outbound type; which of them a type
// takes is outboundKeys (defaults.go). Every key some type lacks is a
// pointer, so that writing it on that type can be refused.
type fileOutbound struct {
	Tag           *string `toml:"tag"`
	Type          *string `toml:"type"`
	AddressFamily *string `toml:"address_family"`
	Drain         string  `toml:"drain"`
	UDP           *bool   `toml:"udp"`

	// Proxy clients.
	Server         *string        `toml:"server"`
	Username       *string        `toml:"username"`
	Password       *string        `toml:"password"`
	Method         *string        `toml:"method"`
	UUID           *string        `toml:"uuid"`
	Flow           *string        `toml:"flow"`
	PacketEncoding *string        `toml:"packet_encoding"`
	Security       *string        `toml:"security"`
	GlobalPadding  *bool          `toml:"global_padding"`
	Transport      *fileTransport `toml:"transport"`
	TLS            *fileTLS       `toml:"tls"`

	// Hysteria 2 (also server, password, tls).
	Obfs                 *fileObfs `toml:"obfs"`
	UpMbps               *int64    `toml:"up_mbps"`
	DownMbps             *int64    `toml:"down_mbps"`
	MaxConcurrentStreams *int64    `toml:"max_concurrent_streams"`

	// WireGuard.
	Endpoint              *string  `toml:"endpoint"`
	EndpointAddressFamily *string  `toml:"endpoint_address_family"`
	PrivateKey            *string  `toml:"private_key"`
	PeerPublicKey         *string  `toml:"peer_public_key"`
	PresharedKey          *string  `toml:"preshared_key"`
	Addresses             []string `toml:"addresses"`
	MTU                   *int64   `toml:"mtu"`
	Keepalive             *string  `toml:"keepalive"`
	AllowedIPs            []string `toml:"allowed_ips"`
	Reserved              []int64  `toml:"reserved"`
}

// fileTransport holds the keys of every transport type; which of them a
// type takes is transportKeys (defaults.go).
type fileTransport struct {
	Type *string `toml:"type"`

	// ws and httpupgrade
	Path            *string           `toml:"path"`
	Host            *string           `toml:"host"`
	Headers         map[string]string `toml:"headers"`
	MaxEarlyData    *int64            `toml:"max_early_data"`
	EarlyDataHeader *string           `toml:"early_data_header"`

	// grpc
	ServiceName *string `toml:"service_name"`
	Authority   *string `toml:"authority"`
	Mode        *string `toml:"mode"`

	// xhttp (with path, host, headers and mode)
	XPaddingBytes        *string            `toml:"x_padding_bytes"`
	ScMaxEachPostBytes   any                `toml:"sc_max_each_post_bytes"`
	ScMinPostsIntervalMs any                `toml:"sc_min_posts_interval_ms"`
	NoGRPCHeader         *bool              `toml:"no_grpc_header"`
	XMux                 *fileXMux          `toml:"xmux"`
	Download             *fileXHTTPDownload `toml:"download"`
}

// fileXHTTPDownload is an xhttp transport's download table.
type fileXHTTPDownload struct {
	Server        *string           `toml:"server"`
	TLS           *fileTLS          `toml:"tls"`
	Path          *string           `toml:"path"`
	Host          *string           `toml:"host"`
	Headers       map[string]string `toml:"headers"`
	XPaddingBytes *string           `toml:"x_padding_bytes"`
	XMux          *fileXMux         `toml:"xmux"`
}

// fileXMux is an xhttp transport's xmux table: each bound an integer or a
// string "N" or "MIN-MAX".
type fileXMux struct {
	MaxConcurrency   any    `toml:"max_concurrency"`
	MaxConnections   any    `toml:"max_connections"`
	CMaxReuseTimes   any    `toml:"c_max_reuse_times"`
	HMaxRequestTimes any    `toml:"h_max_request_times"`
	HMaxReusableSecs any    `toml:"h_max_reusable_secs"`
	HKeepAlivePeriod *int64 `toml:"h_keep_alive_period"`
}

type fileObfs struct {
	Type     *string `toml:"type"`
	Password *string `toml:"password"`
}

type fileTLS struct {
	ServerName  *string      `toml:"server_name"`
	ALPN        []string     `toml:"alpn"`
	Verify      *string      `toml:"verify"`
	CAFile      *string      `toml:"ca_file"`
	Fingerprint *string      `toml:"fingerprint"`
	Reality     *fileReality `toml:"reality"`
}

type fileReality struct {
	PublicKey   *string `toml:"public_key"`
	ShortID     *string `toml:"short_id"`
	ServerName  *string `toml:"server_name"`
	Fingerprint *string `toml:"fingerprint"`
	SpiderX     *string `toml:"spider_x"`
}

type fileBalancer struct {
	Tag           *string  `toml:"tag"`
	Members       []string `toml:"members"`
	Strategy      *string  `toml:"strategy"`
	ProbeInterval *string  `toml:"probe_interval"`
	ProbeTimeout  *string  `toml:"probe_timeout"`
}

// fileGroup holds the keys of every group policy; which of them a policy
// takes is groupKeys (defaults.go).
type fileGroup struct {
	Tag         *string  `toml:"tag"`
	Policy      *string  `toml:"policy"`
	Members     []string `toml:"members"`
	Default     *string  `toml:"default"`
	Final       *string  `toml:"final"`
	Interrupt   *bool    `toml:"interrupt"`
	Use         []string `toml:"use"`
	Tolerance   *string  `toml:"tolerance"`
	CheckURL    *string  `toml:"check_url"`
	IdleTimeout *string  `toml:"idle_timeout"`
}

// fileHealth is [health]. The lists are pointers: a written empty list
// ([] = no URL probe, no UDP probe) is not the same as one left out (the
// defaults).
type fileHealth struct {
	TCPCheckURL    *[]string `toml:"tcp_check_url"`
	TCPCheckMethod *string   `toml:"tcp_check_method"`
	UDPCheckDNS    *[]string `toml:"udp_check_dns"`
	CheckInterval  *string   `toml:"check_interval"`
	CheckTimeout   *string   `toml:"check_timeout"`
	IdleTimeout    *string   `toml:"idle_timeout"`
}

type fileState struct {
	Path *string `toml:"path"`
}

// fileDNS is [dns]; nil when the file has no such table. The server lists
// are nil when left out and empty when written empty (refused).
type fileDNS struct {
	Servers      []string      `toml:"servers"`
	PreProxy     []string      `toml:"pre_proxy"`
	ThroughProxy []string      `toml:"through_proxy"`
	Serve        *bool         `toml:"serve"`
	Bootstrap    *string       `toml:"bootstrap"`
	CacheSize    *int64        `toml:"cache_size"`
	MinTTL       *string       `toml:"min_ttl"`
	MaxTTL       *string       `toml:"max_ttl"`
	Timeout      *string       `toml:"timeout"`
	Rules        []fileDNSRule `toml:"rules"`
	FakeIP       *fileFakeIP   `toml:"fakeip"`
}

type fileDNSRule struct {
	Domain        []string `toml:"domain"`
	DomainSuffix  []string `toml:"domain_suffix"`
	DomainKeyword []string `toml:"domain_keyword"`
	DomainRegex   []string `toml:"domain_regex"`
	RuleSet       []string `toml:"rule_set"`
	Servers       []string `toml:"servers"`
	Action        *string  `toml:"action"`
	BlockWith     *string  `toml:"block_with"`
}

type fileFakeIP struct {
	IPv4   *string  `toml:"ipv4"`
	IPv6   *string  `toml:"ipv6"`
	Filter []string `toml:"fake_ip_filter"`
	Size   *int64   `toml:"size"`
}

// fileAPI is [api]; nil when the file has no such table (no API).
type fileAPI struct {
	Listen           *string  `toml:"listen"`
	Secret           string   `toml:"secret"`
	ExternalUI       string   `toml:"external_ui"`
	CORSAllowOrigins []string `toml:"cors_allow_origins"`
}

type fileRoute struct {
	Final     *string `toml:"final"`
	Mode      *string `toml:"mode"`
	GeoIPPath *string `toml:"geoip_path"`
}

type fileRule struct {
	Inbound       []string `toml:"inbound"`
	Network       string   `toml:"network"`
	Domain        []string `toml:"domain"`
	DomainSuffix  []string `toml:"domain_suffix"`
	DomainKeyword []string `toml:"domain_keyword"`
	DomainRegex   []string `toml:"domain_regex"`
	IPCIDR        []string `toml:"ip_cidr"`
	SourceIPCIDR  []string `toml:"source_ip_cidr"`
	Port          []int64  `toml:"port"`
	PortRange     []string `toml:"port_range"`
	User          []string `toml:"user"`
	Protocol      []string `toml:"protocol"`
	RuleSet       []string `toml:"rule_set"`
	GeoIP         []string `toml:"geoip"`
	Outbound      *string  `toml:"outbound"`
}
