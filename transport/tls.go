package transport

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"switchyard/netx"
	"switchyard/spec"
)

// ErrNoCertificate is the error of a CA bundle that holds no certificate.
var ErrNoCertificate = errors.New("no certificate in CA PEM bundle")

// tlsConfig builds the client TLS configuration: TLS 1.2 at least, SNI from
// server_name (else the server's host), the system roots plus the CA bundle,
// or no verification at all when insecure.
func tlsConfig(t spec.TLS, server netx.Addr) (*tls.Config, error) {
	name := t.ServerName
	if name == "" {
		name = server.Host()
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: name,
		NextProtos: t.ALPN,
	}
	switch {
	case t.Insecure:
		cfg.InsecureSkipVerify = true
	case t.CAFile != "":
		pool, err := caPool(t.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return cfg, nil
}

// caPool is the system roots plus every certificate of the PEM bundle.
func caPool(path string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading CA file: %w", err)
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
			return nil, fmt.Errorf("CA file %s: %w", path, err)
		}
		pool.AddCert(cert)
		n++
	}
	if n == 0 {
		return nil, ErrNoCertificate
	}
	return pool, nil
}
