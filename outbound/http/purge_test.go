package http

import (
	"bufio"
	"io"
	"net"
	stdhttp "net/http"
	"testing"

	"switchyard/outbound/internal/proxytest"
	"switchyard/spec"
)

// Over gRPC, Purge lets the shared HTTP/2 connection go: the next stream
// opens a new one, and the old one ends after its last stream.
func TestPurgeOverGRPC(t *testing.T) {
	srv := proxytest.ServeGRPC(t, nil, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := stdhttp.ReadRequest(br); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n"))
		io.Copy(c, br)
	})
	o, err := New(spec.Outbound{Tag: "up", Type: "http", Server: srv.Addr,
		Transport: spec.Transport{Type: "grpc", ServiceName: "s"}}, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	proxytest.PurgeDrains(t, o, srv, "example.com:443")
}
