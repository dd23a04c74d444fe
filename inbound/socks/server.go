// Package socks is the SOCKS5 inbound, which also serves SOCKS4 and SOCKS4a
// CONNECT: it accepts connections, authenticates them, and hands each
// CONNECT and UDP ASSOCIATE to the connector as a flow.
package socks

import (
	"log/slog"
	"net"
	"net/netip"
	"time"

	"switchyard/inbound"
	"switchyard/inbound/internal/serve"
	"switchyard/spec"
)

// replyTimeout bounds each reply write after the handshake.
const replyTimeout = 10 * time.Second

// Config is one SOCKS5 inbound.
type Config struct {
	Tag    string
	Listen netip.AddrPort
	UDP    bool        // accept UDP ASSOCIATE
	Users  []spec.User // when set, username/password authentication is required
	Sniff  bool        // sniff TLS SNI and HTTP Host from CONNECT streams, QUIC SNI and DNS names from UDP packets
	// SOCKS4 accepts SOCKS4/4a on an inbound with Users, whose user id
	// must then be one of their names (SOCKS4 carries no password).
	// Without Users, SOCKS4 is always accepted.
	SOCKS4 bool
	// HandshakeTimeout bounds a connection's greeting, authentication and
	// request together, from its accept (0: serve.DefaultHandshakeTimeout).
	HandshakeTimeout time.Duration
	// MaxHandshakes bounds the connections in their handshake at once;
	// more are closed at once (0: serve.DefaultMaxHandshakes).
	MaxHandshakes int
	// MaxUDPAssociations caps the UDP ASSOCIATEs served at once; past it a
	// request gets a general failure reply. 0 is no cap.
	MaxUDPAssociations int
}

// Server serves SOCKS5 on the listeners it is given.
type Server struct {
	cfg    Config
	conn   inbound.Connector
	log    *slog.Logger
	conns  *serve.Conns
	hs     *serve.Handshakes
	guard  *serve.Guard
	assocs *associations
}

// New returns a server handing its flows to c. It opens no socket.
func New(cfg Config, c inbound.Connector, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("inbound", cfg.Tag)
	return &Server{
		cfg:    cfg,
		conn:   c,
		log:    log,
		conns:  serve.NewConns(log),
		hs:     serve.NewHandshakes(cfg.HandshakeTimeout, cfg.MaxHandshakes, log),
		guard:  serve.NewGuard(log),
		assocs: newAssociations(cfg.MaxUDPAssociations),
	}
}

// Serve accepts connections on ln until Close, which makes it return nil.
func (s *Server) Serve(ln net.Listener) error {
	return s.conns.Serve(ln, func(c net.Conn) { s.begin(c, nil) })
}

// ServeConn serves one accepted connection whose first bytes, first, were
// already read from it, and returns when the connection is over. It closes
// c. c should be the accepted *net.TCPConn itself so that the relay can
// splice.
func (s *Server) ServeConn(c net.Conn, first []byte) {
	if !s.conns.Add(c) {
		return
	}
	defer s.conns.Done(c)
	s.begin(c, first)
}

// ServeHandshake is ServeConn for a connection whose handshake began
// elsewhere (a mixed port's): hs holds its slot and deadline, and is done
// once the request is read.
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

// Close stops accepting, closes every connection and association, and waits
// for their goroutines.
func (s *Server) Close() error {
	err := s.conns.Stop()
	s.assocs.close()
	s.conns.Wait()
	s.assocs.closeWatcher()
	return err
}
