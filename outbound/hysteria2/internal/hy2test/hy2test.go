// Package hy2test runs an in-process Hysteria 2 server for tests: the
// protocol authors' core/v2 server on a loopback UDP socket, with a
// self-signed certificate a client trusts through its ca_file, and a record
// of every authenticated QUIC connection it served.
package hy2test

import (
	"crypto/tls"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/apernet/hysteria/core/v2/server"
	"github.com/apernet/hysteria/extras/v2/obfs"

	"switchyard/internal/testcert"
)

const (
	// Host is the name the server's certificate is for.
	Host = "hy2.test"
	// Password is the password the server accepts unless told others.
	Password = "hy2-secret"
)

// Cert is a self-signed certificate for Host, also written as a PEM file
// that a client takes as its ca_file.
type Cert struct {
	Certificate tls.Certificate
	CAFile      string
}

// NewCert makes a Cert whose PEM file lives in the test's temporary folder.
func NewCert(t testing.TB) Cert {
	t.Helper()
	c := testcert.New(t, Host)
	return Cert{Certificate: c.Certificate, CAFile: c.CertFile}
}

// Options shape the server.
type Options struct {
	// Users maps every password the server accepts to the id it gives the
	// connections that authenticate with it; nil accepts Password as "user".
	Users      map[string]string
	DisableUDP bool
	// Obfs is the Salamander password; empty: no obfuscation.
	Obfs string
	// Outbound is how the server reaches destinations; nil: it dials them
	// itself.
	Outbound server.Outbound
}

// Server is a running in-process Hysteria 2 server.
type Server struct {
	Addr     netip.AddrPort
	Cert     Cert
	Sessions atomic.Int32  // connections that authenticated
	LastTx   atomic.Uint64 // the receive rate the last client announced

	users map[string]string

	mu    sync.Mutex
	conns []*Conn          // every authenticated connection, in order
	open  map[string]*Conn // the live ones by the client's address
}

// Conn is what the server saw of one authenticated QUIC connection.
type Conn struct {
	Remote  string // the client's address
	User    string // the id its password maps to
	Streams int    // TCP requests it carried
	UDP     int    // UDP sessions it carried
	Closed  bool   // the server saw it end
}

// Start runs a server on a loopback UDP port until the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	uc, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	return StartOn(t, uc, opts)
}

// StartOn runs a server on uc, a socket the test opened (inside a network
// namespace, say), until the test ends; the server owns uc.
func StartOn(t testing.TB, uc *net.UDPConn, opts Options) *Server {
	t.Helper()
	s := &Server{Cert: NewCert(t), users: opts.Users, open: map[string]*Conn{}}
	if s.users == nil {
		s.users = map[string]string{Password: "user"}
	}
	var err error
	s.Addr = uc.LocalAddr().(*net.UDPAddr).AddrPort()
	var pc net.PacketConn = uc
	if opts.Obfs != "" {
		if pc, err = obfs.WrapPacketConnSalamander(uc, []byte(opts.Obfs)); err != nil {
			uc.Close()
			t.Fatal(err)
		}
	}
	srv, err := server.NewServer(&server.Config{
		TLSConfig:     server.TLSConfig{Certificates: []tls.Certificate{s.Cert.Certificate}},
		Conn:          pc,
		Outbound:      opts.Outbound,
		DisableUDP:    opts.DisableUDP,
		Authenticator: authenticator{s},
		EventLogger:   events{s},
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { srv.Serve(); close(done) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return s
}

// Conns is what the server saw of every authenticated connection so far,
// in the order they authenticated.
func (s *Server) Conns() []Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Conn, len(s.conns))
	for i, c := range s.conns {
		out[i] = *c
	}
	return out
}

// conn is the live connection from remote, recorded on first sight (an
// event may come before the connect event of its connection). s.mu is held.
func (s *Server) conn(remote net.Addr) *Conn {
	key := remote.String()
	c, ok := s.open[key]
	if !ok {
		c = &Conn{Remote: key}
		s.open[key] = c
		s.conns = append(s.conns, c)
	}
	return c
}

type authenticator struct{ s *Server }

func (a authenticator) Authenticate(_ net.Addr, auth string, tx uint64) (bool, string) {
	id, ok := a.s.users[auth]
	if !ok {
		return false, ""
	}
	a.s.Sessions.Add(1)
	a.s.LastTx.Store(tx)
	return true, id
}

// events records the server's events per connection.
type events struct{ s *Server }

func (e events) Connect(addr net.Addr, id string, _ uint64) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	e.s.conn(addr).User = id
}

func (e events) Disconnect(addr net.Addr, _ string, _ error) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	e.s.conn(addr).Closed = true
	delete(e.s.open, addr.String())
}

func (e events) TCPRequest(addr net.Addr, _, _ string) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	e.s.conn(addr).Streams++
}

func (e events) UDPRequest(addr net.Addr, _ string, _ uint32, _ string) {
	e.s.mu.Lock()
	defer e.s.mu.Unlock()
	e.s.conn(addr).UDP++
}

func (events) TCPError(net.Addr, string, string, error) {}
func (events) UDPError(net.Addr, string, uint32, error) {}
