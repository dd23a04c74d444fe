package shadowsocks

import (
	"testing"

	"switchyard/outbound/internal/proxytest"
	ss "switchyard/protocol/shadowsocks"
	"switchyard/spec"
)

// Over gRPC, Purge lets the shared HTTP/2 connection go: the next stream
// opens a new one, and the old one ends after its last stream.
func TestPurgeOverGRPC(t *testing.T) {
	s := &aeadServer{key: ss.EVPBytesToKey("secret", 16), targets: make(chan []byte, 1000)}
	srv := proxytest.ServeGRPC(t, nil, s.serve)
	o, err := New(spec.Outbound{Tag: "ss", Type: "shadowsocks", Server: srv.Addr, Method: "aes-128-gcm", Password: "secret",
		Transport: spec.Transport{Type: "grpc", ServiceName: "s"}}, deps())
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	proxytest.PurgeDrains(t, o, srv, "example.com:443")
}
