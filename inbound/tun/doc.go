// Package tun is the TUN inbound (Linux): a kernel TUN device under a
// userspace network stack (internal/netstack, transparent: every
// destination is local to it), so that whatever the machine routes into
// the device becomes flows like any inbound's.
//
// Packets. One goroutine reads the device and hands each packet to the
// stack; another writes what the stack emits back to the device. The
// stack's queue of emitted packets, its TCP buffers and the handshakes in
// progress are bounded (Config). A device read through its file (Linux,
// opened with offloads) is read on a netx.Poller's goroutine, which also
// reads the direct sockets of every UDP association: one wake-up for
// whatever is ready at once, instead of a goroutine each (see
// netx/poller_linux.go for what that gave). A sub-link through a proxy
// keeps its reader goroutine. The device's turn and the replies share
// that goroutine: a send that blocks on it (a proxy's stream whose
// buffer is full) holds the direct replies too, as it always held the
// device's reads.
//
// TCP. The stack's TCP forwarder hands each SYN to the inbound, which
// routes the flow (Connector.ConnectStream) toward the real destination
// address; a fake IP is mapped back to its name by the connector. Without
// sniffing (or toward a fake IP, whose name is known) the handshake with
// the application completes only after the upstream dial succeeded: a
// refused or blocked route answers the SYN with a RST. With sniffing the
// handshake completes first, the first bytes are read for a TLS server
// name or an HTTP host, and a failed dial then resets the connection.
//
// UDP. The stack's UDP packets go to one fan-out association per local
// endpoint of the application (source address and port), which routes
// every packet on its own (Connector.OpenAssociation). The stack's UDP
// endpoints are connected to one peer each, so replies do not go back
// through them: each association's reader builds the IP and UDP headers
// of a reply itself, its source being the peer the reply came from, and
// writes that packet straight to the device. Replies from any number of
// peers thus reach the application, each from its real address (a reply
// attributed to a name is given the fake or real address the application
// sent to). Associations end after Config.UDPIdle without a packet either
// way, and at most Config.MaxAssociations exist: a new one evicts the
// least recently used.
//
// DNS hijack. With DNSHijack, UDP and TCP toward port 53 of any address go
// to the in-process DNS service (Config.DNS), which answers fake IPs when
// configured.
//
// ICMP. An echo request is never answered as if the destination replied
// on its own: see icmp.go.
package tun
