package transport

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"slices"

	utls "github.com/refraction-networking/utls"
)

// fingerprints maps the tls table's fingerprint names to the ClientHello
// shapes they send.
var fingerprints = map[string]utls.ClientHelloID{
	"chrome":  utls.HelloChrome_Auto,
	"firefox": utls.HelloFirefox_Auto,
	"safari":  utls.HelloSafari_Auto,
	"ios":     utls.HelloIOS_Auto,
	"edge":    utls.HelloEdge_Auto,
	"random":  utls.HelloRandomized,
}

// fingerprint is a TLS client whose ClientHello looks like a browser's. It
// verifies the server exactly as the Go client does.
type fingerprint struct {
	hello utls.ClientHelloID
	cfg   *utls.Config
	// alpn replaces the shape's ALPN list when the transport needs one
	// protocol (http/1.1 for the upgrades, h2 for gRPC); nil keeps it.
	alpn []string
}

func newFingerprint(name string, std *tls.Config, alpn []string) (*fingerprint, error) {
	hello, ok := fingerprints[name]
	if !ok {
		return nil, fmt.Errorf("unknown tls fingerprint %q (expected chrome, firefox, safari, ios, edge or random)", name)
	}
	return &fingerprint{
		hello: hello,
		cfg: &utls.Config{
			ServerName:         std.ServerName,
			RootCAs:            std.RootCAs,
			InsecureSkipVerify: std.InsecureSkipVerify,
			MinVersion:         std.MinVersion,
			NextProtos:         slices.Clone(std.NextProtos),
		},
		alpn: slices.Clone(alpn),
	}, nil
}

// client runs the handshake over c with the browser's ClientHello.
func (f *fingerprint) client(ctx context.Context, c net.Conn) (*utls.UConn, error) {
	// The ClientHello build writes to its config: each connection gets its own.
	uc, err := uClient(c, f.cfg.Clone(), f.hello)
	if err != nil {
		return nil, err
	}
	if err := uc.BuildHandshakeState(); err != nil {
		return nil, err
	}
	changed := dropUnsharedHybrid(uc)
	if f.alpn != nil {
		setALPN(uc, f.alpn)
		changed = true
	}
	if changed {
		if err := uc.BuildHandshakeState(); err != nil {
			return nil, err
		}
	}
	if err := uc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return uc, nil
}

// uClient is a uTLS client of the shape id. A fixed shape's spec is made
// here, so that its GREASE ECH extension gets as its encapsulated key the
// public half of a fresh X25519 key, which is what uTLS sends there too:
// uTLS gets it from a whole HPKE encapsulation to a dummy key, whose shared
// secret nothing uses, one X25519 operation of the seven that a chrome
// handshake with REALITY makes. A randomized shape is built by uTLS.
func uClient(c net.Conn, cfg *utls.Config, id utls.ClientHelloID) (*utls.UConn, error) {
	spec, err := utls.UTLSIdToSpec(id)
	if err != nil {
		return utls.UClient(c, cfg, id), nil
	}
	for _, ext := range spec.Extensions {
		if g, ok := ext.(*utls.GREASEEncryptedClientHelloExtension); ok && len(g.EncapsulatedKey) == 0 {
			k, err := ecdh.X25519().GenerateKey(rand.Reader)
			if err != nil {
				return nil, err
			}
			g.EncapsulatedKey = k.PublicKey().Bytes()
		}
	}
	uc := utls.UClient(c, cfg, utls.HelloCustom)
	if err := uc.ApplyPreset(&spec); err != nil {
		return nil, err
	}
	return uc, nil
}

// dropUnsharedHybrid takes X25519MLKEM768 out of the supported groups of a
// hello that sends no key share for it, and reports whether it did. The
// randomized shape can list it without a share; a server that prefers it
// (every Go server does) then asks for it in a HelloRetryRequest, which
// uTLS cannot answer with a hybrid key, and the handshake fails.
func dropUnsharedHybrid(uc *utls.UConn) bool {
	var (
		curves *utls.SupportedCurvesExtension
		shared bool
	)
	for _, ext := range uc.Extensions {
		switch e := ext.(type) {
		case *utls.SupportedCurvesExtension:
			curves = e
		case *utls.KeyShareExtension:
			shared = slices.ContainsFunc(e.KeyShares, func(k utls.KeyShare) bool { return k.Group == utls.X25519MLKEM768 })
		}
	}
	if curves == nil || shared || !slices.Contains(curves.Curves, utls.X25519MLKEM768) {
		return false
	}
	curves.Curves = slices.DeleteFunc(slices.Clone(curves.Curves), func(id utls.CurveID) bool { return id == utls.X25519MLKEM768 })
	return true
}

// setALPN makes the ClientHello offer exactly protos, adding the extension
// to a shape that has none.
func setALPN(uc *utls.UConn, protos []string) {
	for _, ext := range uc.Extensions {
		if a, ok := ext.(*utls.ALPNExtension); ok {
			a.AlpnProtocols = slices.Clone(protos)
			return
		}
	}
	uc.Extensions = append(uc.Extensions, &utls.ALPNExtension{AlpnProtocols: slices.Clone(protos)})
}
