package tun

import (
	"context"
	"net"
	"net/netip"
	"time"

	"switchyard/netx"
)

// Defaults and bounds of Config.
const (
	DefaultMTU             = 9000
	DefaultMaxAssociations = 1024
	DefaultUDPIdle         = 60 * time.Second
	// DefaultTCPBuffer caps each TCP connection's send and receive buffers
	// in the stack; they start at tcpBufferStart and grow toward the cap
	// only as a connection's throughput needs (Linux's tcp_rmem: 128 KiB
	// to 6 MiB).
	DefaultTCPBuffer = 4 << 20
	tcpBufferStart   = 128 << 10
	// DefaultMaxHandshakes bounds the TCP connections whose upstream dial
	// is in progress; SYNs beyond it are dropped (the application retries).
	DefaultMaxHandshakes = 1024
	// maxDNSInFlight bounds the hijacked DNS queries answered at once;
	// maxEchoInFlight the echo requests relayed at once.
	maxDNSInFlight  = 256
	maxEchoInFlight = 64
	// writeBatch bounds the packets written to an offloading device at
	// once (each buffer 64 KiB: 2 MiB per inbound).
	writeBatch = 32
	// timeWait is how long the stack keeps a closed connection of the
	// device in TIME-WAIT: the link is local, so no late segment needs it,
	// and an application reusing a port soon is not answered by a
	// connection that ended.
	timeWait = time.Second
	// packetOffset is the headroom before each packet in the device's
	// buffers (the virtio header of an offloading TUN).
	packetOffset = 16
	// virtioHdrLen is the virtio-net header before each packet of an
	// offloading TUN's file.
	virtioHdrLen = 10
	// The virtio-net header's flag that leaves the checksum to the kernel,
	// and its type of UDP segmentation offload (linux/virtio_net.h).
	virtioNeedsCsum = 1
	virtioGSOUDPL4  = 5
)

// Config describes one TUN inbound.
type Config struct {
	Tag       string
	Name      string         // the device's name
	Addresses []netip.Prefix // the device's addresses (the kernel's side)
	MTU       int
	Sniff     bool // TLS SNI / HTTP Host on TCP, QUIC SNI on UDP
	// DNSHijack sends UDP and TCP toward port 53 of any address to DNS.
	DNSHijack bool
	// DNS is the DNS service in force, or nil when there is none.
	DNS func() DNS
	// IsFake reports whether an address is a fake IP of the DNS service:
	// the flow's name is known, so the handshake waits for the dial even
	// with Sniff. nil: no fake IPs.
	IsFake func(netip.Addr) bool

	MaxAssociations int
	UDPIdle         time.Duration
	TCPBuffer       int
	MaxHandshakes   int

	// Route, when not nil, is installed once the device is up (auto_route)
	// and removed at Close.
	Route *Route
	// Ping relays ICMP echo toward destinations routed direct; nil refuses
	// every echo with an unreachable.
	Ping Pinger
}

// DNS is the in-process DNS service as the inbound uses it.
type DNS interface {
	// Answer returns the reply to one query message.
	Answer(ctx context.Context, msg []byte, network netx.Network) ([]byte, error)
	// Stream is a connection speaking DNS over TCP to the service.
	Stream() net.Conn
}

func (c *Config) defaults() {
	if c.MTU <= 0 {
		c.MTU = DefaultMTU
	}
	if c.MaxAssociations <= 0 {
		c.MaxAssociations = DefaultMaxAssociations
	}
	if c.UDPIdle <= 0 {
		c.UDPIdle = DefaultUDPIdle
	}
	if c.TCPBuffer <= 0 {
		c.TCPBuffer = DefaultTCPBuffer
	}
	if c.MaxHandshakes <= 0 {
		c.MaxHandshakes = DefaultMaxHandshakes
	}
}

// Route is what auto_route installs (route_linux.go): routes into the
// device in a table of its own and the policy rules that send traffic
// there, except the process's own marked sockets, loopback and the
// device's own range.
type Route struct {
	Table    int    // the routing table; DefaultTable when 0
	Priority int    // the first rule's priority; DefaultPriority when 0
	Mark     uint32 // the socket policy's mark: such packets skip the TUN
	// Include are the destinations routed into the device (route_address);
	// empty: everything.
	Include []netip.Prefix
	// Exclude are never routed into it (route_exclude_address).
	Exclude []netip.Prefix
	// Strict also blocks what would bypass the device while the routes
	// change (strict_route).
	Strict bool
}

// Pinger relays ICMP echo for the inbound (icmp.go).
type Pinger interface {
	// Echo asks whether dst routes direct and, when it does, sends one echo
	// request with payload to it and returns the reply's payload. direct is
	// false when dst routes elsewhere (a proxy cannot carry ICMP; block
	// refuses it): the inbound answers unreachable.
	Echo(ctx context.Context, src, dst netip.Addr, payload []byte) (reply []byte, direct bool, err error)
}
