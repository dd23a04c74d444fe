package transport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"switchyard/spec"
)

// serverName is the name the test server's certificate is issued to.
const serverName = "proxy.switchyard.test"

// pki is a CA the test makes, a server certificate it issued, and the CA's
// PEM file.
type pki struct {
	caFile string
	leaf   tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "switchyard test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: serverName},
		DNSNames:     []string{serverName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{
		caFile: writeFile(t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})),
		leaf:   tls.Certificate{Certificate: [][]byte{leafDER}, PrivateKey: key},
	}
	return p
}

func (p *pki) serverConfig(minVersion, maxVersion uint16) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{p.leaf},
		MinVersion:   minVersion,
		MaxVersion:   maxVersion,
		NextProtos:   []string{"h2", "http/1.1"},
	}
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveTLS is a TLS echo server on loopback.
func serveTLS(t *testing.T, cfg *tls.Config) netip.AddrPort {
	return accept(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		tc.SetDeadline(time.Time{})
		echo(tc)
	})
}

func tlsOutbound(server netip.AddrPort, t *spec.TLS) spec.Outbound {
	return spec.Outbound{Server: server.String(), TLS: t}
}

func TestTLSVerification(t *testing.T) {
	p := newPKI(t)
	server := serveTLS(t, p.serverConfig(tls.VersionTLS12, tls.VersionTLS13))

	t.Run("unknown authority refused by default", func(t *testing.T) {
		_, err := dial(t, tlsOutbound(server, &spec.TLS{ServerName: serverName}), deps(nil))
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) || !strings.Contains(err.Error(), "x509: certificate signed by unknown authority") {
			t.Fatalf("error %v", err)
		}
		if !strings.HasPrefix(err.Error(), "tls handshake with "+server.String()+": ") {
			t.Fatalf("error %q does not name the server", err)
		}
	})
	t.Run("accepted with the CA file", func(t *testing.T) {
		c, err := dial(t, tlsOutbound(server, &spec.TLS{ServerName: serverName, CAFile: p.caFile, ALPN: []string{"http/1.1"}}), deps(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tc := c.(*TLSStream).Conn.(*tls.Conn)
		st := tc.ConnectionState()
		if st.ServerName != serverName || st.NegotiatedProtocol != "http/1.1" || st.Version < tls.VersionTLS12 {
			t.Fatalf("state: name %q, ALPN %q, version %#x", st.ServerName, st.NegotiatedProtocol, st.Version)
		}
		c.Write([]byte("ping"))
		b := make([]byte, 4)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(b); err != nil || string(b) != "ping" {
			t.Fatalf("echo %q, %v", b, err)
		}
	})
	t.Run("server name defaults to the server's host", func(t *testing.T) {
		d := deps(nil)
		d.Resolver = resolver{serverName: {netip.MustParseAddr("127.0.0.1")}}
		o := spec.Outbound{Server: serverName + ":" + strconv.Itoa(int(server.Port())), TLS: &spec.TLS{CAFile: p.caFile}}
		c, err := dial(t, o, d)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	})
	t.Run("accepted when insecure", func(t *testing.T) {
		c, err := dial(t, tlsOutbound(server, &spec.TLS{ServerName: "anything.test", Insecure: true}), deps(nil))
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	})
	t.Run("wrong server name refused", func(t *testing.T) {
		_, err := dial(t, tlsOutbound(server, &spec.TLS{ServerName: "other.test", CAFile: p.caFile}), deps(nil))
		var host x509.HostnameError
		if !errors.As(err, &host) || !strings.Contains(err.Error(), "x509: certificate is valid for "+serverName+", not other.test") {
			t.Fatalf("error %v", err)
		}
	})
}

// The client refuses anything older than TLS 1.2.
func TestTLSMinimumVersion(t *testing.T) {
	p := newPKI(t)
	old := serveTLS(t, p.serverConfig(tls.VersionTLS10, tls.VersionTLS11))
	_, err := dial(t, tlsOutbound(old, &spec.TLS{ServerName: serverName, CAFile: p.caFile}), deps(nil))
	if err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("a TLS 1.1 server: %v", err)
	}
	only12 := serveTLS(t, p.serverConfig(tls.VersionTLS12, tls.VersionTLS12))
	c, err := dial(t, tlsOutbound(only12, &spec.TLS{ServerName: serverName, CAFile: p.caFile}), deps(nil))
	if err != nil {
		t.Fatalf("a TLS 1.2 server: %v", err)
	}
	if v := c.(*TLSStream).TLSVersion(); v != tls.VersionTLS12 {
		t.Fatalf("version %#x", v)
	}
	c.Close()
}

func TestCAFileErrors(t *testing.T) {
	p := newPKI(t)
	caPEM, _ := os.ReadFile(p.caFile)
	keyOnly := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte{1, 2, 3}})
	garbage := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER at all")})
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "no certificate in CA PEM bundle"},
		{"no certificate block", keyOnly, "no certificate in CA PEM bundle"},
		{"not PEM", []byte("hello"), "no certificate in CA PEM bundle"},
		{"unparsable certificate", append(append([]byte(nil), caPEM...), garbage...), "x509: malformed certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "ca.pem", tc.data)
			_, err := New(spec.Outbound{Server: "127.0.0.1:1", TLS: &spec.TLS{CAFile: path}}, deps(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if tc.want == ErrNoCertificate.Error() && !errors.Is(err, ErrNoCertificate) {
				t.Fatalf("%v is not ErrNoCertificate", err)
			}
		})
	}
	_, err := New(spec.Outbound{Server: "127.0.0.1:1", TLS: &spec.TLS{CAFile: filepath.Join(t.TempDir(), "missing.pem")}}, deps(nil))
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing CA file: %v", err)
	}
}
