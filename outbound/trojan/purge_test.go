package trojan

import (
	"io"
	"net"
	"testing"

	"switchyard/outbound/internal/proxytest"
	codec "switchyard/protocol/trojan"
	"switchyard/spec"
)

// Over gRPC, Purge lets the shared HTTP/2 connection go: the next stream
// opens a new one, and the old one ends after its last stream.
func TestPurgeOverGRPC(t *testing.T) {
	srv := proxytest.ServeGRPC(t, serverTLS(t), func(c net.Conn) {
		if readRequest(t, c, "secret", codec.CmdConnect) == nil {
			return
		}
		io.Copy(c, c)
	})
	o, err := New(spec.Outbound{Tag: "t", Type: "trojan", Server: srv.Addr, Password: "secret",
		TLS: &spec.TLS{ServerName: "trojan.test", Insecure: true}, Transport: spec.Transport{Type: "grpc", ServiceName: "s"}}, proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	proxytest.PurgeDrains(t, o, srv, "example.com:443")
}
