package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"

	"switchyard/netx"
	"switchyard/spec"
)

// ErrNoCertificate is the error of a CA bundle that holds no certificate.
var ErrNoCertificate = errors.New("no certificate in CA PEM bundle")

// tlsLayer is the TLS client of one outbound: Go's own ClientHello, or a
// browser's when a fingerprint is set. Both verify alike.
type tlsLayer struct {
	std     *tls.Config
	fp      *fingerprint   // nil: Go's ClientHello
	reality *realityClient // a REALITY handshake instead of either
	// need is the protocol the transport must run on: "h2" for gRPC,
	// "http/1.1" for the HTTP/1.1 upgrades, "" for a plain stream.
	need string
}

// newTLSLayer builds the client configuration: TLS 1.2 at least, SNI from
// server_name (else the server's host), the system roots plus the CA
// bundle, or no verification at all when insecure. alpn, when set, is the
// one protocol the transport needs and replaces the table's ALPN.
func newTLSLayer(t spec.TLS, server netx.Addr, alpn []string) (*tlsLayer, error) {
	if t.Reality != nil {
		if t.ServerName == "" {
			t.ServerName = server.Host()
		}
		r, err := newRealityClient(t, alpn)
		if err != nil {
			return nil, err
		}
		return &tlsLayer{reality: r}, nil
	}
	cfg, err := tlsConfig(t, server)
	if err != nil {
		return nil, err
	}
	l := &tlsLayer{std: cfg}
	if alpn != nil {
		cfg.NextProtos = alpn
		l.need = alpn[0]
	}
	if t.Fingerprint != "" {
		// The shape's own ALPN list stands unless the transport needs one
		// protocol or the table names its own.
		fpALPN := alpn
		if fpALPN == nil && len(t.ALPN) > 0 {
			fpALPN = t.ALPN
		}
		if l.fp, err = newFingerprint(t.Fingerprint, cfg, fpALPN); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// client runs the TLS handshake over c, bounded by ctx, and checks that the
// server agreed to the protocol the transport needs.
func (l *tlsLayer) client(ctx context.Context, c net.Conn) (net.Conn, error) {
	var (
		tc  net.Conn
		got string
	)
	netx.Mark(ctx, netx.PhaseTLS)
	if l.reality != nil {
		// The protocol is the one the target site's answer carries: the
		// transport runs on it as Xray's client does, unchecked.
		return l.reality.client(ctx, c)
	}
	if l.fp != nil {
		uc, err := l.fp.client(ctx, c)
		if err != nil {
			return nil, err
		}
		tc, got = uc, uc.ConnectionState().NegotiatedProtocol
	} else {
		sc := tls.Client(c, l.std)
		if err := sc.HandshakeContext(ctx); err != nil {
			return nil, err
		}
		tc, got = sc, sc.ConnectionState().NegotiatedProtocol
	}
	switch {
	case l.need == "h2" && got != "h2":
		return nil, fmt.Errorf("the server did not agree to HTTP/2 (ALPN %q)", got)
	case l.need == "http/1.1" && got != "" && got != "http/1.1":
		return nil, fmt.Errorf("the server chose ALPN %q, not http/1.1", got)
	}
	return tc, nil
}

// tlsConfig is the Go TLS configuration of a tls table.
func tlsConfig(t spec.TLS, server netx.Addr) (*tls.Config, error) {
	name := t.ServerName
	if name == "" {
		name = server.Host()
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: name,
		NextProtos: slices.Clone(t.ALPN),
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
