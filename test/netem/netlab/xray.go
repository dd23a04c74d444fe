package netlab

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The credentials and names the Xray server of the namespace takes.
const (
	UUID       = "6b1e2c8a-3f0d-4d39-9a57-0c6f4e2b9d11"
	Password   = "netem-secret"
	ServerName = "netem.test"
	VLESSPort  = 8443 // VLESS over TLS
	TrojanPort = 9443 // Trojan (over TLS)
)

// WriteCert writes a self-signed certificate for ServerName (its own CA,
// so a client given it as its CA verifies the server) and its key into
// dir, returning the two paths.
func WriteCert(dir string) (certFile, keyFile string, err error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: ServerName},
		DNSNames:              []string{ServerName},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// Account is the i-th account of the Xray server: a VLESS UUID and a
// Trojan password. Account 0 is UUID and Password.
func Account(i int) (uuid, password string) {
	if i == 0 {
		return UUID, Password
	}
	return fmt.Sprintf("%s%012x", UUID[:len(UUID)-12], i), fmt.Sprintf("%s-%d", Password, i)
}

// XrayServer is the config of an Xray server on addr with two inbounds,
// VLESS over TLS on VLESSPort and Trojan over TLS on TrojanPort, both with
// the certificate in certFile and accounts accounts each (Account(0) up),
// and a freedom outbound. Its policy is Xray's default: a connection that
// has not sent its request within 4 s of being accepted is closed.
func XrayServer(addr netip.Addr, certFile, keyFile string, accounts int) string {
	var vless, trojan []string
	for i := range max(accounts, 1) {
		uuid, password := Account(i)
		vless = append(vless, fmt.Sprintf(`{"id":%q}`, uuid))
		trojan = append(trojan, fmt.Sprintf(`{"password":%q}`, password))
	}
	tls := fmt.Sprintf(`"streamSettings":{"network":"tcp","security":"tls","tlsSettings":{"certificates":[{"certificateFile":%q,"keyFile":%q}]}}`, certFile, keyFile)
	return fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[`+
		`{"listen":%q,"port":%d,"protocol":"vless","settings":{"clients":[%s],"decryption":"none"},%s},`+
		`{"listen":%q,"port":%d,"protocol":"trojan","settings":{"clients":[%s]},%s}],`+
		`"outbounds":[{"protocol":"freedom"}]}`,
		addr, VLESSPort, strings.Join(vless, ","), tls, addr, TrojanPort, strings.Join(trojan, ","), tls)
}

// WaitListening waits until something accepts TCP on addr, or until
// within has passed.
func WaitListening(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nothing listens on %s after %v: %w", addr, within, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
