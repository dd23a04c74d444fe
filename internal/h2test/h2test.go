// Package h2test serves HTTP/2 on a connection a test accepted itself,
// with net/http's server, for tests that count or cut the connections of
// an HTTP/2 server (gRPC, XHTTP).
package h2test

import (
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
)

// ServeConn serves HTTP/2 on c with h and returns once the connection has
// ended: over TLS when c is a *tls.Conn whose handshake negotiated h2, as
// cleartext HTTP/2 with prior knowledge (h2c) otherwise. A client that
// speaks HTTP/1.1 instead is served HTTP/1.1.
func ServeConn(c net.Conn, h http.Handler) {
	ended := make(chan struct{})
	var once sync.Once
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	protos.SetHTTP2(true)
	protos.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Handler:   h,
		Protocols: protos,
		ErrorLog:  log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				once.Do(func() { close(ended) })
			}
		},
	}
	ln := &oneConn{c: c, closed: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln) //nolint:errcheck // ends with the listener, below
	}()
	<-ended
	srv.Close()
	<-served
}

// oneConn is a listener that accepts c, then nothing until it is closed.
type oneConn struct {
	mu     sync.Mutex
	c      net.Conn
	closed chan struct{}
	once   sync.Once
}

var errListenerClosed = errors.New("h2test: listener closed")

func (l *oneConn) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, errListenerClosed
}

func (l *oneConn) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConn) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "h2test" }
