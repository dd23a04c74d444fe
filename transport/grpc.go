package transport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"switchyard/internal/slot"
	"switchyard/netx"
	"switchyard/spec"
)

// grpcConfig is the gRPC transport of one outbound.
type grpcConfig struct {
	authority string
	path      string // /<service>/Tun or /<service>/TunMulti
	scheme    string // https over TLS; http over cleartext (h2c)
	multi     bool
}

// newGRPCConfig applies the defaults (authority from tls.server_name or the
// server, mode gun) and builds the call's path. Without TLS (overTLS unset)
// the calls run on cleartext HTTP/2 with prior knowledge (h2c): the
// connection preface goes out first, with no HTTP/1.1 upgrade, as Xray's
// and sing-box's clients do.
func newGRPCConfig(t spec.Transport, host string, overTLS bool) (*grpcConfig, error) {
	g := &grpcConfig{authority: t.Authority, scheme: "http"}
	if overTLS {
		g.scheme = "https"
	}
	if g.authority == "" {
		g.authority = host
	}
	if g.authority == "" {
		return nil, errors.New("missing grpc authority")
	}
	g.authority = hostHeader(g.authority)
	if !printable(g.authority) {
		return nil, fmt.Errorf("grpc authority %q holds a space or a control character", g.authority)
	}
	switch t.Mode {
	case "", "gun":
	case "multi":
		g.multi = true
	default:
		return nil, fmt.Errorf("unknown grpc mode %q (expected \"gun\" or \"multi\")", t.Mode)
	}
	g.path = grpcPath(t.ServiceName, g.multi)
	return g, nil
}

// grpcPath is the call's path, as Xray and sing-box build it: the service
// name escaped, then Tun or TunMulti. A service name that starts with "/"
// is a whole path ("/a/b/Name" calls /a/b/Name, in either mode), each
// segment escaped.
func grpcPath(service string, multi bool) string {
	if !strings.HasPrefix(service, "/") {
		method := "Tun"
		if multi {
			method = "TunMulti"
		}
		return "/" + url.PathEscape(service) + "/" + method
	}
	parts := strings.Split(service[1:], "/")
	last := len(parts) - 1
	parts[last], _, _ = strings.Cut(parts[last], "|")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/" + strings.Join(parts, "/")
}

// grpcPool keeps the one HTTP/2 connection an outbound's streams share,
// in a slot (internal/slot): one connect at a time, shared by the dials
// that arrive meanwhile; the backoff after failed connects; a dead
// connection replaced by the next dial, at once (a connection that dies
// young is no failure here: slot.Policy.IgnoreDeaths, since the next
// connect tells whether the server is back). Each stream holds the
// connection until it is closed. A connection that went away (GOAWAY) or
// is full is retired: the next dial connects afresh, and the old one
// closes when its last stream ends.
type grpcPool struct {
	d    *Dialer
	cfg  *grpcConfig
	slot *slot.Slot[*h2Conn]
}

// grpcRetries bounds the connections one dial tries when each it gets takes
// no new stream (a server that allows none).
const grpcRetries = 3

func newGRPCPool(d *Dialer, cfg *grpcConfig) *grpcPool {
	p := &grpcPool{d: d, cfg: cfg}
	p.slot = slot.New(slot.Config[*h2Conn]{
		Establish:  p.connect,
		Policy:     slot.Policy{IgnoreDeaths: true},
		Phase:      netx.PhaseTransport,
		ErrBackoff: fmt.Errorf("grpc: the connection to %s is down, waiting before the next attempt: %w", d.server, slot.ErrBackoff),
		ErrClosed:  ErrClosed,
		OnFail: func(err error) {
			d.log.Warn(fmt.Sprintf("grpc: connecting to %s failed: %v", d.server, err))
		},
		OnLost: func(*h2Conn) {
			d.log.Debug(fmt.Sprintf("grpc: the connection to %s ended", d.server))
		},
	})
	return p
}

// dial opens a stream on the shared connection, connecting first when there
// is none that takes a new stream. It returns once the stream's HEADERS
// are written.
//
// A speculative dial (netx.Speculative: a candidate of a cold URLTest UDP
// preparation) shares the connection in service or the connect in flight
// as any dial does; with neither it connects one of its own, under its own
// context, published nowhere: the stream holds it and closing the stream
// closes it, unless Commit put it in service first.
func (p *grpcPool) dial(ctx context.Context) (*grpcConn, error) {
	acquire := p.slot.Acquire
	if netx.Speculative(ctx) {
		acquire = p.slot.AcquireDetached
	}
	for try := 1; ; try++ {
		r, err := acquire(ctx)
		if err != nil {
			return nil, err
		}
		s, err := r.V.open()
		if err == nil {
			g := newGRPCConn(s, r.Release)
			if r.Detached() {
				g.adopt = func() { p.slot.Adopt(r) }
			}
			return g, nil
		}
		r.Release()
		if !errors.Is(err, errH2Unusable) {
			return nil, err
		}
		p.slot.Retire(r, false)
		if try == grpcRetries {
			return nil, fmt.Errorf("grpc: %d connections to %s in a row took no new stream: %w", try, p.d.server, err)
		}
	}
}

// connect opens a new HTTP/2 connection: TCP, TLS with ALPN h2 when the
// outbound has a tls table, the connection preface and both sides'
// settings.
func (p *grpcPool) connect(ctx context.Context) (*h2Conn, error) {
	raw, err := p.d.connect(ctx)
	if err != nil {
		return nil, err
	}
	c := newH2Conn(raw, p.cfg)
	netx.Mark(ctx, netx.PhaseTransport)
	if err := netx.Within(ctx, raw, c.handshake); err != nil {
		raw.Close()
		return nil, fmt.Errorf("grpc: HTTP/2 with %s: %w", p.d.server, err)
	}
	go c.readLoop()
	return c, nil
}

// purge lets the shared connection go: the next dial connects afresh,
// while the streams open on it carry on, and it closes once the last of
// them ends (at once when none is open). A connect in flight is kept: it
// is a new connection already.
func (p *grpcPool) purge() { p.slot.Purge() }

// close ends the shared connection with its streams, abandons a connect in
// flight and refuses later dials; it waits for the pool's goroutines.
func (p *grpcPool) close() { p.slot.Close() }

// Done is closed once the connection's read loop ended: the connection is
// over (slot.Resource).
func (c *h2Conn) Done() <-chan struct{} { return c.loopDone }

// Close ends the connection with every stream on it and waits for its read
// loop (slot.Resource).
func (c *h2Conn) Close() { c.shutdown(ErrClosed, true) }

// SlotState reads the state of the slot that holds the shared HTTP/2
// connection of gRPC (phase, generation, backoff, last error), for the API
// and metrics; ok is false for a transport that keeps nothing between
// dials.
func (d *Dialer) SlotState() (st slot.State, ok bool) {
	if d.grpc == nil {
		return slot.State{}, false
	}
	return d.grpc.slot.State(), true
}
