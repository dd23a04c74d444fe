package netx

import "net/netip"

// Network is the transport a flow uses.
type Network uint8

const (
	TCP Network = iota
	UDP
)

func (n Network) String() string {
	if n == UDP {
		return "udp"
	}
	return "tcp"
}

// Flow is what an inbound hands to the connector: one TCP connection, or one
// UDP association (whose packets are then routed one by one, each as the
// association's flow aimed at its own destination).
type Flow struct {
	Network Network
	Dst     Addr
	Src     netip.AddrPort
	Inbound string // tag of the inbound that accepted the flow
	User    string // authenticated user name, "" when anonymous
	// Session is the tracker's id of the session of the authenticated
	// connection the flow came on; 0 when the flow has none.
	Session uint64
	Sniffed string // domain sniffed from the first bytes (TLS SNI, HTTP Host), "" when none
	// Protocol is the sniffed application protocol: "tls", "http", "quic",
	// "dns", or "" when unknown.
	Protocol string
	// SniffPackets asks that each packet of a UDP association be sniffed
	// (QUIC Initial, DNS query) before it is routed: the inbound sniffs.
	SniffPackets bool
}

// Toward returns the flow aimed at dst: network, source, inbound, user,
// session and SniffPackets are kept; sniffing results are cleared because they described
// another destination.
func (f Flow) Toward(dst Addr) Flow {
	f.Dst = dst
	f.Sniffed = ""
	f.Protocol = ""
	return f
}
