package vless

import (
	"io"
	"net"
	"testing"

	"switchyard/outbound/internal/proxytest"
	codec "switchyard/protocol/vless"
	"switchyard/spec"
)

// Over gRPC, Purge lets the shared HTTP/2 connection go: the next stream
// opens a new one, and the old one ends after its last stream.
func TestPurgeOverGRPC(t *testing.T) {
	srv := proxytest.ServeGRPC(t, nil, func(c net.Conn) {
		if readRequest(t, c, codec.CmdTCP) == nil {
			return
		}
		c.Write([]byte{0, 0})
		io.Copy(c, c)
	})
	o, err := New(spec.Outbound{Tag: "v", Type: "vless", Server: srv.Addr, UUID: testUUID,
		Transport: spec.Transport{Type: "grpc", ServiceName: "s"}}, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	proxytest.PurgeDrains(t, o, srv, "example.com:443")
}
