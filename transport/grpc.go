package transport

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

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

// grpcPool keeps the one HTTP/2 connection an outbound's streams share. A
// connection that died, went away or is full is replaced on the next dial;
// the old one closes when its last stream ends.
type grpcPool struct {
	d   *Dialer
	cfg *grpcConfig

	mu      sync.Mutex // guards what follows; never held across I/O
	cur     *h2Conn
	dialing chan struct{} // closed when the dial in flight ends
	closed  bool
}

func newGRPCPool(d *Dialer, cfg *grpcConfig) *grpcPool { return &grpcPool{d: d, cfg: cfg} }

// dial opens a stream on the shared connection, connecting first when there
// is none that takes a new stream. It returns once the stream's HEADERS
// are written.
func (p *grpcPool) dial(ctx context.Context) (*grpcConn, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, ErrClosed
		}
		if c := p.cur; c != nil {
			p.mu.Unlock()
			s, err := c.open()
			if err == nil {
				return newGRPCConn(s), nil
			}
			if !errors.Is(err, errH2Unusable) {
				return nil, err
			}
			p.mu.Lock()
			if p.cur == c {
				p.cur = nil
				p.mu.Unlock()
				c.unpool()
				continue
			}
			p.mu.Unlock()
			continue
		}
		if wait := p.dialing; wait != nil {
			p.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		done := make(chan struct{})
		p.dialing = done
		p.mu.Unlock()
		c, err := p.connect(ctx)
		p.mu.Lock()
		p.dialing = nil
		closed := p.closed
		if err == nil && !closed {
			p.cur = c
		}
		close(done)
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		if closed {
			c.shutdown(ErrClosed, true)
			return nil, ErrClosed
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
func (p *grpcPool) purge() {
	p.mu.Lock()
	c := p.cur
	p.cur = nil
	p.mu.Unlock()
	if c != nil {
		c.unpool()
	}
}

// close ends the shared connection and refuses later dials.
func (p *grpcPool) close() {
	p.mu.Lock()
	c := p.cur
	p.cur = nil
	p.closed = true
	p.mu.Unlock()
	if c != nil {
		c.shutdown(ErrClosed, true)
	}
}
