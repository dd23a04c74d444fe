package trojan

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"switchyard/outbound/internal/proxytest"
	"switchyard/spec"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serverTLS is a self-signed certificate for "trojan.test".
func serverTLS(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "trojan.test"},
		DNSNames:     []string{"trojan.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
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
