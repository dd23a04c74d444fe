package hysteria2

import (
	"crypto/x509"
	"encoding/pem"
	"os"

	"github.com/apernet/hysteria/core/v2/client"
)

// clientTLS is the TLS side of one connect attempt. The CA bundle is read
// here, on every attempt, so a replaced file takes effect at the next
// connection and a broken one fails the attempt, never the construction.
func (o *Outbound) clientTLS() (client.TLSConfig, error) {
	cfg := client.TLSConfig{ServerName: o.serverName, InsecureSkipVerify: o.insecure}
	if o.caFile != "" && !o.insecure {
		pool, err := loadCA(o.caFile)
		if err != nil {
			return client.TLSConfig{}, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// loadCA returns the system roots plus every certificate of the PEM bundle
// at path. Blocks that are not certificates are skipped.
func loadCA(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, caReadError(err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	n := 0
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, caCertError(err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, errNoCertificates
	}
	return pool, nil
}
