// Package mixed serves SOCKS5, SOCKS4/4a and the HTTP proxy protocol on one
// listener: the first byte of a connection tells them apart.
package mixed

import (
	"errors"
	"io"
	"log/slog"
	"net"

	"switchyard/inbound"
	httpin "switchyard/inbound/http"
	"switchyard/inbound/internal/serve"
	"switchyard/inbound/socks"
	"switchyard/protocol/socks4"
	"switchyard/protocol/socks5"
)

// Config is the SOCKS inbound's: UDP (UDP ASSOCIATE) and SOCKS4 (SOCKS4
// beside Users) hold for SOCKS clients, Users and Sniff for both protocols.
type Config = socks.Config

// Server dispatches each connection to a SOCKS (5 or 4) or an HTTP server.
type Server struct {
	socks *socks.Server
	http  *httpin.Server
	log   *slog.Logger
	conns *serve.Conns
	hs    *serve.Handshakes // one bound and one deadline over the first byte and either handshake
}

// New returns a server handing its flows to c. It opens no socket.
func New(cfg Config, c inbound.Connector, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	mlog := log.With("inbound", cfg.Tag)
	return &Server{
		socks: socks.New(cfg, c, log),
		http:  httpin.New(httpin.Config(cfg), c, log),
		log:   mlog,
		conns: serve.NewConns(mlog),
		hs:    serve.NewHandshakes(cfg.HandshakeTimeout, cfg.MaxHandshakes, mlog),
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
	hs := s.hs.Begin(c.RemoteAddr())
	if hs == nil {
		return
	}
	if len(first) > 0 {
		s.dispatch(c, first, hs)
		return
	}
	s.read(c, hs)
}

// handle starts the handshake of a connection just accepted, or drops it
// when the inbound is at its bound of handshakes.
func (s *Server) handle(c net.Conn) {
	hs := s.hs.Begin(c.RemoteAddr())
	if hs == nil {
		return
	}
	s.read(c, hs)
}

// read reads the first byte, under the deadline of the whole handshake:
// SOCKS5 and SOCKS4 start with their version, 5 or 4; anything else is
// taken for HTTP.
func (s *Server) read(c net.Conn, hs *serve.Handshake) {
	c.SetReadDeadline(hs.Deadline)
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		hs.Done()
		if !errors.Is(err, io.EOF) {
			s.log.Debug("mixed connection ended before its first byte", "source", c.RemoteAddr(), "error", err)
		}
		return
	}
	s.dispatch(c, first[:], hs)
}

func (s *Server) dispatch(c net.Conn, first []byte, hs *serve.Handshake) {
	if first[0] == socks5.Version || first[0] == socks4.Version {
		s.socks.ServeHandshake(c, first, hs)
	} else {
		s.http.ServeHandshake(c, first, hs)
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
