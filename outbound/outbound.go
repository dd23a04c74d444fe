// Package outbound defines what every outbound is: a dialer of streams and of
// datagram links. Protocol code lives in the sub-packages; Build wires them.
package outbound

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"switchyard/netx"
)

// Outbound opens flows. Both methods may be called concurrently.
type Outbound interface {
	// DialStream returns once the flow is ready to carry bytes: for a proxy,
	// after the upstream dial, the handshake and its flush.
	DialStream(ctx context.Context, f netx.Flow) (net.Conn, error)
	// DialPacket opens a datagram link; each packet names its own peer.
	// Protocols without UDP return an error that Is ErrNoUDP.
	DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error)
}

// Networks is implemented by every outbound of this module: it says, from
// the outbound's configuration alone and before any dial, which networks the
// outbound carries. TCP is carried by every outbound (block refuses each
// stream by rule, which is its purpose, not a missing capability).
type Networks interface {
	// CarriesUDP reports whether DialPacket can open a link: false exactly
	// when DialPacket refuses, without dialing, with an error that Is
	// ErrNoUDP (the protocol has no UDP, or the configuration turns it off).
	// Refusals that depend on the target or on what a server answers (a
	// server that relays no UDP, a target-specific rejection) are not
	// known before a dial: they stay refusals at admission, and CarriesUDP
	// still reports true.
	CarriesUDP() bool
}

// CarriesUDP reports whether o carries datagrams as configured. An outbound
// that does not implement Networks is taken to carry them: its DialPacket
// decides at admission. A wrapper of an outbound implements Networks by
// asking what it wraps, with this function.
func CarriesUDP(o Outbound) bool {
	if n, ok := o.(Networks); ok {
		return n.CarriesUDP()
	}
	return true
}

// ErrNoUDP is matched (errors.Is) by the error of an outbound that carries no
// datagrams.
var ErrNoUDP = errors.New("carries no datagrams")

// NoUDPError is the refusal of a protocol without UDP; its text is
// "<what> carries no datagrams".
type NoUDPError struct{ What string }

func (e *NoUDPError) Error() string        { return e.What + " carries no datagrams" }
func (e *NoUDPError) Is(target error) bool { return target == ErrNoUDP }

// ErrBlocked is the error of a stream routed to a block outbound. Inbounds
// answer it as a refusal by rule (SOCKS5 reply 0x02, HTTP 403).
var ErrBlocked = errors.New("blocked by route")

// Deps is what an outbound is built with.
type Deps struct {
	Dialer *netx.Dialer // sockets under the socket policy
	// Servers resolves proxy servers and endpoints; Destinations resolves the
	// destinations this process connects to itself (direct).
	Servers      netx.Resolver
	Destinations netx.Resolver
	Logger       *slog.Logger
	// ConnectTimeout bounds one TCP connect attempt (default 10 s).
	ConnectTimeout time.Duration
	// DNS is the in-process DNS service as an outbound (the "dns" type);
	// nil without [dns].
	DNS Outbound
}

// Purger is implemented by an outbound that keeps connections for reuse
// (a QUIC connection, a tunnel, an HTTP/2 connection, mux carriers): Purge
// releases them, so the next flow builds them afresh. Flows open on them
// are not cut. It is called when health finds the node dead.
type Purger interface {
	Purge()
}

// Prober is implemented by an outbound with a TCP upstream that a health
// probe can reach: the proxy server it dials; the zero Addr when its
// transport reaches the server over UDP only.
type Prober interface {
	ProbeTarget() netx.Addr
}
