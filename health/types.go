package health

import (
	"context"
	"encoding/hex"
	"time"

	"switchyard/netx"
)

// NodeID is a node's identity: a UUID given to an outbound tag when it
// first appears, kept while the tag stays in the configuration across
// reloads (a node whose configuration changed keeps it; a tag removed and
// added back gets a new one). Health, registrations, histories and
// latencies are keyed by it, never by the display name.
type NodeID [16]byte

func (id NodeID) String() string {
	var b [36]byte
	hex.Encode(b[0:8], id[0:4])
	b[8] = '-'
	hex.Encode(b[9:13], id[4:6])
	b[13] = '-'
	hex.Encode(b[14:18], id[6:8])
	b[18] = '-'
	hex.Encode(b[19:23], id[8:10])
	b[23] = '-'
	hex.Encode(b[24:], id[10:])
	return string(b[:])
}

// IsZero reports whether id is unset.
func (id NodeID) IsZero() bool { return id == NodeID{} }

// Domain is one of the three health domains of a node.
type Domain uint8

const (
	TCP     Domain = iota // the node's TCP path
	DNSUDP                // DNS through the node's packet path
	DataUDP               // other datagrams through the node's packet path
)

var domainNames = [...]string{"tcp", "dns_udp", "data_udp"}

func (d Domain) String() string {
	if int(d) < len(domainNames) {
		return domainNames[d]
	}
	return "domain?"
}

// Domains and Families are every domain and family, in order: a node has
// one state for each pair, six in all.
var (
	Domains  = [...]Domain{TCP, DNSUDP, DataUDP}
	Families = [...]netx.Family{netx.V4, netx.V6}
)

// Result is one successful measurement: its round trip and the address
// family of the connection to the node's server that carried it.
type Result struct {
	RTT    time.Duration
	Family netx.Family
}

// Prober measures one node through its own outbound. Each call is one
// disposable measurement bounded by ctx; a failure is an error (its family,
// when known, in a *FamilyError).
type Prober interface {
	// TCP sends method to url through the node and returns the RTT of the
	// second request (see package probe); with url "" it performs a raw
	// TCP connect to the node's server and returns the connect time.
	TCP(ctx context.Context, url, method string) (Result, error)
	// UDP sends one minimal DNS query to server through the node's packet
	// path and returns the round trip of its answer.
	UDP(ctx context.Context, server netx.Addr) (Result, error)
}

// FamilyError is a measurement failure that knows the address family of
// the connection to the node's server it failed on.
type FamilyError struct {
	Family netx.Family
	Err    error
}

func (e *FamilyError) Error() string { return e.Err.Error() }
func (e *FamilyError) Unwrap() error { return e.Err }
