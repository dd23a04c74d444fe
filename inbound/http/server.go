// Package http is the HTTP proxy inbound: CONNECT tunnels, and plain
// requests in absolute form forwarded to their origin over keep-alive
// connections. Every tunnel and every origin connection is a flow handed to
// the connector.
package http

import (
	"log/slog"
	"net"
	"net/netip"
	"time"

	"switchyard/inbound"
	"switchyard/inbound/internal/serve"
	"switchyard/spec"
)

const (
	// replyTimeout bounds each response the proxy writes on its own.
	replyTimeout = 10 * time.Second
	// keepAliveTimeout bounds the wait for the next request head on a kept
	// connection.
	keepAliveTimeout = 60 * time.Second
	// forwardIdle ends a forwarded exchange that moves no byte for this long.
	forwardIdle = 5 * time.Minute
)

// Config is one HTTP proxy inbound. It has the shape of the SOCKS inbound's;
// UDP has no meaning here.
type Config struct {
	Tag    string
	Listen netip.AddrPort
	UDP    bool
	Users  []spec.User // when set, Proxy-Authorization: Basic is required
	Sniff  bool        // sniff TLS SNI and HTTP Host from CONNECT tunnels
	SOCKS4 bool        // unused: a SOCKS inbound's setting, here so that its Config converts
	// HandshakeTimeout bounds a connection's request heads until one is
	// authorized, from its accept (0: serve.DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the connections in their handshake at once;
	// more are closed at once (0: serve.DefaultMaxHandshakes).
	MaxHandshakes int
	// MaxUDPAssociations is the SOCKS inbound's (a mixed inbound shares
	// its config); HTTP has no UDP.
	MaxUDPAssociations int
}

// Server serves the HTTP proxy protocol on the listeners it is given.
type Server struct {
	cfg   Config
	conn  inbound.Connector
	log   *slog.Logger
	conns *serve.Conns
	hs    *serve.Handshakes
	guard *serve.Guard
}

// New returns a server handing its flows to c. It opens no socket.
func New(cfg Config, c inbound.Connector, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("inbound", cfg.Tag)
	return &Server{
		cfg:   cfg,
		conn:  c,
		log:   log,
		conns: serve.NewConns(log),
		hs:    serve.NewHandshakes(cfg.HandshakeTimeout, cfg.MaxHandshakes, log),
		guard: serve.NewGuard(log),
	}
}

// Serve accepts connections on ln until Close, which makes it return nil.
func (s *Server) Serve(ln net.Listener) error {
	return s.conns.Serve(ln, func(c net.Conn) { s.begin(c, nil) })
}

// ServeConn serves one accepted connection whose first bytes, first, were
// already read from it, and returns when the connection is over. It closes
// c. c should be the accepted *net.TCPConn itself so that CONNECT tunnels
// can splice.
func (s *Server) ServeConn(c net.Conn, first []byte) {
	if !s.conns.Add(c) {
		return
	}
	defer s.conns.Done(c)
	s.begin(c, first)
}

// ServeHandshake is ServeConn for a connection whose handshake began
// elsewhere (a mixed port's): hs holds its slot and deadline, and is done
// once a request is authorized.
func (s *Server) ServeHandshake(c net.Conn, first []byte, hs *serve.Handshake) {
	if !s.conns.Add(c) {
		hs.Done()
		return
	}
	defer s.conns.Done(c)
	s.handle(c, first, hs)
}

// begin starts the handshake of a connection just accepted, or drops it
// when the inbound is at its bound of handshakes.
func (s *Server) begin(c net.Conn, first []byte) {
	hs := s.hs.Begin(c.RemoteAddr())
	if hs == nil {
		return
	}
	s.handle(c, first, hs)
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *Server) Close() error { return s.conns.Close() }
