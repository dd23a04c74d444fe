// Package mixed serves SOCKS5, SOCKS4/4a and the HTTP proxy protocol on one
// listener: the first byte of a connection tells them apart.
package mixed

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"time"

	"switchyard/inbound"
	httpin "switchyard/inbound/http"
	"switchyard/inbound/internal/serve"
	"switchyard/inbound/socks"
	"switchyard/protocol/socks4"
	"switchyard/protocol/socks5"
)

// firstByteTimeout bounds the wait for a client's first byte.
const firstByteTimeout = 10 * time.Second

// Config is the SOCKS inbound's: UDP (UDP ASSOCIATE) and SOCKS4 (SOCKS4
// beside Users) hold for SOCKS clients, Users and Sniff for both protocols.
type Config = socks.Config

// Server dispatches each connection to a SOCKS (5 or 4) or an HTTP server.
type Server struct {
	socks *socks.Server
	http  *httpin.Server
	log   *slog.Logger
	conns *serve.Conns
}

// New returns a server handing its flows to c. It opens no socket.
func New(cfg Config, c inbound.Connector, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{
		socks: socks.New(cfg, c, log),
		http:  httpin.New(httpin.Config(cfg), c, log),
		log:   log.With("inbound", cfg.Tag),
		conns: serve.NewConns(),
	}
}

// Serve accepts connections on ln until Close, which makes it return nil.
func (s *Server) Serve(ln net.Listener) error {
	return s.conns.Serve(ln, s.handle)
}

// ServeConn serves one accepted connection, of which first was already
// read (nil when nothing was), and returns when it is over. It closes c.
func (s *Server) ServeConn(c net.Conn, first []byte) {
	if !s.conns.Add(c) {
		return
	}
	defer s.conns.Done(c)
	if len(first) > 0 {
		s.dispatch(c, first)
		return
	}
	s.handle(c)
}

// handle reads the first byte: SOCKS5 and SOCKS4 start with their
// version, 5 or 4; anything else is taken for HTTP.
func (s *Server) handle(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(firstByteTimeout))
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		if !errors.Is(err, io.EOF) {
			s.log.Debug("mixed connection ended before its first byte", "source", c.RemoteAddr(), "error", err)
		}
		return
	}
	s.dispatch(c, first[:])
}

func (s *Server) dispatch(c net.Conn, first []byte) {
	if first[0] == socks5.Version || first[0] == socks4.Version {
		s.socks.ServeConn(c, first)
	} else {
		s.http.ServeConn(c, first)
	}
}

// Close stops accepting, closes every connection of both protocols, and
// waits for their goroutines.
func (s *Server) Close() error {
	err := s.conns.Stop()
	err = errors.Join(err, s.socks.Close(), s.http.Close())
	s.conns.Wait()
	return err
}
