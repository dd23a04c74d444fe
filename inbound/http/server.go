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
	// headTimeout bounds the first request head of a connection, and each
	// response the proxy writes on its own.
	headTimeout = 10 * time.Second
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
}

// New returns a server handing its flows to c. It opens no socket.
func New(cfg Config, c inbound.Connector, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:   cfg,
		conn:  c,
		log:   log.With("inbound", cfg.Tag),
		conns: serve.NewConns(),
	}
}

// Serve accepts connections on ln until Close, which makes it return nil.
func (s *Server) Serve(ln net.Listener) error {
	return s.conns.Serve(ln, func(c net.Conn) { s.handle(c, nil) })
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
	s.handle(c, first)
}

// Close stops accepting, closes every connection and waits for their
// goroutines.
func (s *Server) Close() error { return s.conns.Close() }
