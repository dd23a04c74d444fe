// Package quicecho is the QUIC echo server of the end-to-end tests: a
// quic-go server that echoes the first stream of every connection.
package quicecho

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"testing"

	"github.com/quic-go/quic-go"

	"switchyard/internal/testcert"
)

// ALPN is the protocol the server offers; a client names it too.
const ALPN = "switchyard-test"

// Serve runs the echo server on pc (QUIC versions 1 and 2, a certificate
// for "quic.example") until the test ends; cleanup closes pc and waits
// for the server's goroutines.
func Serve(t testing.TB, pc net.PacketConn) {
	t.Helper()
	cert := testcert.New(t, "quic.example")
	ln, err := quic.Listen(pc, &tls.Config{
		Certificates: []tls.Certificate{cert.Certificate},
		NextProtos:   []string{ALPN},
	}, &quic.Config{Versions: []quic.Version{quic.Version1, quic.Version2}})
	if err != nil {
		pc.Close()
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			wg.Go(func() {
				defer conn.CloseWithError(0, "")
				s, err := conn.AcceptStream(context.Background())
				if err != nil {
					return
				}
				io.Copy(s, s)
				s.Close()
				// The client closes once it read the echo; closing the
				// listener ends the rest.
				<-conn.Context().Done()
			})
		}
	})
	t.Cleanup(func() { ln.Close(); pc.Close(); wg.Wait() })
}
