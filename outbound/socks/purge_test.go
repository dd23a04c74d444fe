package socks

import (
	"net"
	"testing"

	"switchyard/outbound/internal/proxytest"
	"switchyard/spec"
)

// Over gRPC, Purge lets the shared HTTP/2 connection go: the next stream
// opens a new one, and the old one ends after its last stream.
func TestPurgeOverGRPC(t *testing.T) {
	s := &server{}
	srv := proxytest.ServeGRPC(t, nil, func(c net.Conn) { s.serve(t, c) })
	o, err := New(spec.Outbound{Tag: "up", Type: "socks", Server: srv.Addr,
		Transport: spec.Transport{Type: "grpc", ServiceName: "s"}}, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	proxytest.PurgeDrains(t, o, srv, "example.com:443")
}
