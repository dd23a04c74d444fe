package trojan

import (
	"crypto/tls"
	"net"
	"testing"

	"go.uber.org/goleak"

	"switchyard/internal/testcert"
	"switchyard/outbound/internal/proxytest"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serverTLS is a self-signed certificate for "trojan.test".
func serverTLS(t *testing.T) *tls.Config {
	t.Helper()
	return &tls.Config{Certificates: []tls.Certificate{testcert.New(t, "trojan.test").Certificate}}
}

// serve runs handle on every connection accepted on a loopback TLS
// listener until the test ends, and returns the listener's address.
func serve(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := tls.Listen("tcp4", "127.0.0.1:0", serverTLS(t))
	if err != nil {
		t.Fatal(err)
	}
	return proxytest.Serve(t, ln, handle)
}

func newTrojan(t *testing.T, server, password string) *Outbound {
	t.Helper()
	o, err := New(spec.Outbound{Tag: "t", Type: "trojan", Server: server, Password: password, UDP: true,
		TLS: &spec.TLS{ServerName: "trojan.test", Insecure: true}},
		proxytest.Deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	return o
}
