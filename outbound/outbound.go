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
}

// Prober is implemented by an outbound with a TCP upstream that a health
// probe can reach: the proxy server it dials.
type Prober interface {
	ProbeTarget() netx.Addr
}
