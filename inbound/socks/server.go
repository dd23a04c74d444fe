// Package socks is the SOCKS5 inbound: it accepts connections, authenticates
// them, and hands each CONNECT and UDP ASSOCIATE to the connector as a flow.
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

// handshakeTimeout bounds the greeting, the authentication and the request,
// and each reply write.
const handshakeTimeout = 10 * time.Second

// Config is one SOCKS5 inbound.
type Config struct {
	Tag    string
	Listen netip.AddrPort
	UDP    bool        // accept UDP ASSOCIATE
	Users  []spec.User // when set, username/password authentication is required
	Sniff  bool        // sniff TLS SNI and HTTP Host from CONNECT streams, QUIC SNI and DNS names from UDP packets
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
	assocs *associations
}

// New returns a server handing its flows to c. It opens no socket.
func New(cfg Config, c inbound.Connector, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		cfg:    cfg,
		conn:   c,
		log:    log.With("inbound", cfg.Tag),
		conns:  serve.NewConns(),
		assocs: newAssociations(cfg.MaxUDPAssociations),
	}
}

// Serve accepts connections on ln until Close, which makes it return nil.
func (s *Server) Serve(ln net.Listener) error {
	return s.conns.Serve(ln, func(c net.Conn) { s.handle(c, nil) })
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
	s.handle(c, first)
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
