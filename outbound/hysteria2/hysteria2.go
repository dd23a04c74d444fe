// Package hysteria2 is the Hysteria 2 outbound. It keeps one authenticated
// QUIC connection per outbound version in a slot every flow shares, brought
// up by the first flow and brought back after it dies; a TCP flow is a
// stream on it, a UDP flow a session over its QUIC datagrams in which every
// packet names its own peer. When health finds the node dead, Purge lets
// the connection go: the next flow brings a new one up, while the flows
// open on the old one carry on until they end, and the old one then
// closes. The protocol itself is the protocol authors'
// client (core/v2) and Salamander (extras/v2); this package owns the slot,
// resolution, the socket policy, errors, logs and the datagram links.
package hysteria2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apernet/hysteria/core/v2/client"

	"switchyard/internal/slot"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// bytesPerMbps turns a rate in Mbps into the bytes per second core/v2's
// bandwidth configuration takes.
const bytesPerMbps = 1_000_000 / 8

// saltMinLen is the shortest Salamander password.
const saltMinLen = 4

// Outbound is a Hysteria 2 outbound.
type Outbound struct {
	server         netx.Addr
	strategy       netx.Strategy
	resolver       netx.Resolver
	sockets        *netx.Dialer
	password       string
	obfs           []byte // Salamander password; nil = no obfuscation
	serverName     string
	insecure       bool
	caFile         string
	bandwidth      client.BandwidthConfig
	attemptTimeout time.Duration // one address's QUIC handshake and authentication
	log            *slog.Logger

	slot      *slot.Slot[*conn]
	streams   streamCap   // max_concurrent_streams
	udpWarned atomic.Bool // the UDP refusal was logged for this outbound version
}

var (
	_ outbound.Outbound = (*Outbound)(nil)
	_ outbound.Networks = (*Outbound)(nil)
	_ outbound.Purger   = (*Outbound)(nil)
)

// New builds a Hysteria 2 outbound from a validated spec. It opens nothing
// and reads no file: the first flow brings the connection up.
func New(o spec.Outbound, deps outbound.Deps) (*Outbound, error) {
	return newOutbound(o, deps, time.Now)
}

// newOutbound is New with the clock of the slot's backoff; tests pass a
// manual one.
func newOutbound(o spec.Outbound, deps outbound.Deps, now func() time.Time) (*Outbound, error) {
	if deps.Dialer == nil {
		return nil, errors.New("hysteria2: no dialer")
	}
	server, err := netx.ParseAddr(o.Server)
	if err != nil {
		return nil, fmt.Errorf("hysteria2: server: %w", err)
	}
	strategy, err := netx.ParseStrategy(o.AddressFamily)
	if err != nil {
		return nil, fmt.Errorf("hysteria2: %w", err)
	}
	if o.UpMbps < 0 || o.DownMbps < 0 {
		return nil, fmt.Errorf("hysteria2: up_mbps and down_mbps must not be negative (got %d and %d)", o.UpMbps, o.DownMbps)
	}
	out := &Outbound{
		server:         server,
		strategy:       strategy,
		resolver:       deps.Servers,
		sockets:        deps.Dialer,
		password:       o.Password,
		serverName:     server.Host(),
		attemptTimeout: deps.ConnectTimeout,
		log:            deps.Logger,
		bandwidth: client.BandwidthConfig{
			MaxTx: uint64(o.UpMbps) * bytesPerMbps,
			MaxRx: uint64(o.DownMbps) * bytesPerMbps,
		},
	}
	if o.Obfs != nil {
		if o.Obfs.Type != "salamander" {
			return nil, fmt.Errorf("hysteria2: unknown obfs type %q (expected salamander)", o.Obfs.Type)
		}
		if len(o.Obfs.Password) < saltMinLen {
			return nil, fmt.Errorf("hysteria2: the salamander password must be at least %d bytes", saltMinLen)
		}
		out.obfs = []byte(o.Obfs.Password)
	}
	if t := o.TLS; t != nil {
		if len(t.ALPN) > 0 && !slices.Equal(t.ALPN, []string{"h3"}) {
			return nil, fmt.Errorf("hysteria2: tls alpn must be [\"h3\"]: Hysteria 2 runs over HTTP/3 (got %q)", t.ALPN)
		}
		if t.Fingerprint != "" {
			return nil, errors.New("hysteria2: tls fingerprint does not apply: the QUIC handshake has its own ClientHello")
		}
		if t.ServerName != "" {
			out.serverName = t.ServerName
		}
		out.insecure, out.caFile = t.Insecure, t.CAFile
	}
	if out.resolver == nil {
		out.resolver = netx.SystemResolver{}
	}
	if out.attemptTimeout <= 0 {
		out.attemptTimeout = netx.DefaultConnectTimeout
	}
	if out.log == nil {
		out.log = slog.New(slog.DiscardHandler)
	}
	out.slot = slot.New(slot.Config[*conn]{
		Establish:  out.connect,
		Now:        now,
		Timeout:    netx.EstablishTimeout(out.attemptTimeout),
		Phase:      netx.PhaseQUIC,
		ErrBackoff: errBackoff,
		ErrClosed:  errClosed,
		OnFail: func(err error) {
			out.log.Warn(fmt.Sprintf("hysteria2: connect failed: %v", err))
		},
		OnLost: func(*conn) { out.log.Warn("hysteria2: connection closed, reconnecting") },
	})
	out.streams = newStreamCap(o.MaxConcurrentStreams)
	return out, nil
}

// Close ends the outbound: a connect in flight is abandoned, and the
// connection is closed with every stream and datagram link on it. Dials
// after Close fail. It waits for the outbound's goroutines.
func (o *Outbound) Close() error {
	o.slot.Close()
	return nil
}

// DialStream opens a stream to the flow's destination on the connection and
// returns once the server has answered that it reached the destination. A
// connection found dead is replaced once. With max_concurrent_streams
// streams open, it first waits for one of them to close.
func (o *Outbound) DialStream(ctx context.Context, f netx.Flow) (net.Conn, error) {
	if err := o.streams.take(ctx); err != nil {
		return nil, err
	}
	s, r, err := o.dialStream(ctx, f)
	if err != nil {
		o.streams.give()
		return nil, err
	}
	return &stream{Conn: s, out: o, res: r}, nil
}

// dialStream opens the stream; it returns it with the hold it has on its
// connection.
func (o *Outbound) dialStream(ctx context.Context, f netx.Flow) (net.Conn, *slot.Res[*conn], error) {
	for try := 0; ; try++ {
		r, err := o.slot.Acquire(ctx)
		if err != nil {
			return nil, nil, err
		}
		s, err := r.V.client.TCP(f.Dst.String())
		if err != nil {
			r.Release()
			gone := connectionGone(err)
			err = r.V.carrier(err) // before Lost closes the connection
			if gone {
				o.slot.Lost(r)
				if try == 0 {
					continue
				}
			}
			return nil, nil, fmt.Errorf("hysteria2: opening a stream to %s: %w", f.Dst, err)
		}
		// With the request written, the first read takes the server's answer.
		netx.Mark(ctx, netx.PhaseHandshake)
		err = netx.Within(ctx, s, func() error {
			_, err := s.Read(nil)
			return err
		})
		if err != nil {
			s.Close()
			r.Release()
			gone := connectionGone(err)
			err = r.V.carrier(refusal(err)) // before Lost closes the connection
			if gone {
				o.slot.Lost(r)
			}
			return nil, nil, fmt.Errorf("hysteria2: %s: %w", f.Dst, err)
		}
		return s, r, nil
	}
}

// CarriesUDP reports true: a UDP flow is a session over the connection's
// QUIC datagrams, and nothing in the configuration turns them off
// (outbound.Networks). A server that relays no UDP or offers no QUIC
// datagrams is known only once connected: DialPacket refuses then, with an
// error that Is ErrNoUDP, at admission.
func (o *Outbound) CarriesUDP() bool { return true }

// DialPacket opens a UDP session on the connection. Every packet on it names
// its peer, so one link serves all the peers of an association. A server
// that relays no UDP, or offered no QUIC datagrams, is refused (and the
// refusal logged once per outbound).
//
// A speculative dial (netx.Speculative: a candidate of a cold URLTest UDP
// preparation) takes the connection in service, or joins the connect in
// flight, as any dial does; with neither it connects a QUIC connection of
// its own, under its own context, and publishes nothing: the link owns the
// connection and closing it closes the connection. Commit, on the winner,
// puts the connection in the slot when the slot is still empty (the next
// flow reuses it); otherwise the link keeps using its own connection
// alone and closes it when it closes.
func (o *Outbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	acquire := o.slot.Acquire
	if netx.Speculative(ctx) {
		acquire = o.slot.AcquireDetached
	}
	for try := 0; ; try++ {
		r, err := acquire(ctx)
		if err != nil {
			return nil, err
		}
		c := r.V
		if !c.udp {
			r.Release()
			o.refuseUDP(errNoRelay)
			return nil, errNoRelay
		}
		if c.noDatagrams.Load() {
			r.Release()
			o.refuseUDP(errNoDatagrams)
			return nil, errNoDatagrams
		}
		u, err := c.client.UDP()
		if err != nil {
			r.Release()
			if connectionGone(err) {
				o.slot.Lost(r)
				if try == 0 {
					continue
				}
			}
			return nil, fmt.Errorf("hysteria2: opening a UDP session: %w", err)
		}
		return newPacketLink(u, r, o), nil
	}
}

// Purge lets the QUIC connection go, so that the next flow brings a new
// one up (outbound.Purger). The streams and UDP sessions open on it are not
// cut: it closes once the last of them ends, at once when none is open.
// Purge is no connect failure: it leaves the backoff as it is.
func (o *Outbound) Purge() { o.slot.Purge() }

// ServerFamily is the address family of the server address the current
// QUIC connection runs to; ok is false while there is none. A stream's
// RemoteAddr tells it too; a UDP session reports its own connection's.
func (o *Outbound) ServerFamily() (f netx.Family, ok bool) {
	if r, ok := o.slot.Current(); ok {
		return r.V.family()
	}
	return netx.V4, false
}

// SlotState reads the state of the slot that holds the QUIC connection
// (phase, generation, backoff, last error), for the API and metrics; ok is
// always true.
func (o *Outbound) SlotState() (st slot.State, ok bool) { return o.slot.State(), true }

// refuseUDP logs why UDP goes nowhere, once per outbound version.
func (o *Outbound) refuseUDP(err error) {
	if o.udpWarned.CompareAndSwap(false, true) {
		o.log.Warn(fmt.Sprintf("%v; datagrams routed to this outbound are dropped", err))
	}
}
