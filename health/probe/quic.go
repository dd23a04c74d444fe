package probe

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"

	"switchyard/health"
	"switchyard/netx"
)

// ALPNH3 is the application protocol the QUIC probe offers and requires.
const ALPNH3 = "h3"

// h3NoError is HTTP/3's H3_NO_ERROR, the code the probe closes with.
const h3NoError quic.ApplicationErrorCode = 0x100

var _ health.QUICProber = (*prober)(nil)

// QUIC performs the Score QUIC evidence handshake (see the package
// documentation): TLS 1.3 in QUIC with ALPN h3 toward url's host and port
// through the node's packet path, the certificate verified as the HTTP
// probe verifies it. The RTT is the handshake's, from the first Initial
// sent to the handshake's completion.
func (p *prober) QUIC(ctx context.Context, url string) (health.Result, error) {
	t, err := parseTarget(url)
	if err != nil {
		return health.Result{}, err
	}
	if !t.https {
		return health.Result{}, badURL(url, "the QUIC probe needs an https URL")
	}
	dctx, cancel := context.WithTimeout(ctx, p.t.Dial)
	link, err := p.out.DialPacket(dctx, netx.Flow{Network: netx.UDP, Dst: t.dst})
	cancel()
	if err != nil {
		f, known := p.family(nil)
		return fail(f, known, fmt.Errorf("probe: opening the packet path to %s: %w", t.dst, err))
	}
	pc := newLinkConn(link, t.dst)
	defer pc.Close()
	f, known := p.family(link)

	hctx, cancel := context.WithTimeout(ctx, p.t.TLS)
	defer cancel()
	tc := &tls.Config{
		ServerName: t.serverName,
		RootCAs:    p.opts.RootCAs,
		NextProtos: []string{ALPNH3},
		MinVersion: tls.VersionTLS13,
	}
	confirmed := newConfirmation()
	qc := &quic.Config{
		// The context bounds the handshake; QUIC's own timer stays
		// behind it so that the error names the budget.
		HandshakeIdleTimeout: 2 * p.t.TLS,
		// The path's MTU is the tunnel's, not a socket's to probe.
		DisablePathMTUDiscovery: true,
		Tracer: func(context.Context, bool, quic.ConnectionID) qlogwriter.Trace {
			return confirmed
		},
	}
	// A transport of the probe's own: closing it (before the link) waits
	// for its read loop.
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	start := time.Now()
	conn, err := tr.Dial(hctx, pc.peer, tc, qc)
	rtt := time.Since(start)
	if err != nil {
		if hctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", context.Cause(hctx), err)
		}
		return fail(f, known, fmt.Errorf("probe: QUIC handshake with %s: %w", t.authority, err))
	}
	// The handshake is complete here, but the client's Finished may still
	// be queued: closing now could drop it, and the server would never
	// complete its side. The close waits for the server's confirmation
	// (HANDSHAKE_DONE), within the same budget.
	select {
	case <-confirmed.ch:
	case <-hctx.Done():
		p.log.Debug("probe: the QUIC server did not confirm the handshake within the budget", "server", t.authority)
	}
	proto := conn.ConnectionState().TLS.NegotiatedProtocol
	_ = conn.CloseWithError(h3NoError, "")
	if proto != ALPNH3 {
		return fail(f, known, fmt.Errorf("probe: QUIC handshake with %s: the server negotiated %q, not h3", t.authority, proto))
	}
	return health.Result{RTT: rtt, Family: f}, nil
}

// confirmation is a qlog trace of one connection that keeps nothing but
// the handshake's confirmation: ch closes when the client confirms it
// (the server's HANDSHAKE_DONE).
type confirmation struct {
	once sync.Once
	ch   chan struct{}
}

func newConfirmation() *confirmation { return &confirmation{ch: make(chan struct{})} }

func (c *confirmation) AddProducer() qlogwriter.Recorder { return c }
func (c *confirmation) Close() error                     { return nil }

func (c *confirmation) RecordEvent(ev qlogwriter.Event) {
	var u qlog.ConnectionStateUpdated
	switch e := ev.(type) {
	case qlog.ConnectionStateUpdated:
		u = e
	case *qlog.ConnectionStateUpdated:
		u = *e
	default:
		return
	}
	if u.State == qlog.ConnectionStateHandshakeConfirmed {
		c.once.Do(func() { close(c.ch) })
	}
}
