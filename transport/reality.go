package transport

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	utls "github.com/refraction-networking/utls"

	"switchyard/netx"
	"switchyard/spec"
)

// REALITY is a TLS 1.3 handshake whose ClientHello carries, sealed in its
// session id, a proof that the client knows the server's X25519 public key
// and one of its short ids. A REALITY server that opens the proof answers
// with a temporary ed25519 certificate whose signature field is an HMAC of
// the shared secret; any other ClientHello it forwards to the target site,
// whose real certificate the client then sees.
//
// The session id, 32 bytes: the client version (3 bytes), a reserved zero,
// the Unix time (4 bytes, big-endian) and the short id (8 bytes), sealed
// with AES-GCM under the auth key: the X25519 secret of the hello's own key
// share and the server's public key, expanded by HKDF-SHA256 with the first
// 20 bytes of the client random as salt and "REALITY" as info. The nonce is
// the last 12 bytes of the random and the additional data the whole
// ClientHello with a zero session id.

// realityVersion is the client version the session id announces. Servers
// may bound the versions they accept; these are Xray's of the pinned peer.
var realityVersion = [3]byte{26, 3, 27}

// sessionIDOffset is where the session id sits in the ClientHello
// message: the handshake header (4), the legacy version (2), the random
// (32) and the session id's length (1).
const sessionIDOffset = 4 + 2 + 32 + 1

// ErrRealityTarget is the error of a REALITY handshake the server answered
// as the target site: the public key or the short id is not the server's,
// or the server is not a REALITY server. Its fault is netx.FaultProxyAuth.
var ErrRealityTarget error = &netx.FaultError{Kind: netx.FaultProxyAuth, Err: errors.New(
	"REALITY: the server answered as the target site, not with its REALITY certificate (wrong public_key or short_id, or not a REALITY server)")}

// realityClient is the REALITY layer of one outbound.
type realityClient struct {
	hello     utls.ClientHelloID
	name      string // the server name the hello sends
	alpn      []string
	publicKey *ecdh.PublicKey
	shortID   [8]byte
	spiderX   string
	now       func() time.Time
	// roots verify the certificate of a server that answered as the target
	// site (whether to browse it or fail at once); nil: the system's.
	roots *x509.CertPool
	// fullRecords: no small first records (tlsLayer.fullRecords).
	fullRecords bool
}

func newRealityClient(t spec.TLS, alpn []string) (*realityClient, error) {
	r := t.Reality
	name := t.Fingerprint
	if name == "" {
		name = "chrome"
	}
	hello, ok := fingerprints[name]
	if !ok {
		return nil, fmt.Errorf("unknown tls fingerprint %q (expected chrome, firefox, safari, ios, edge or random)", name)
	}
	pub, err := ecdh.X25519().NewPublicKey(r.PublicKey[:])
	if err != nil {
		return nil, fmt.Errorf("REALITY public key: %w", err)
	}
	spider := r.SpiderX
	if spider == "" {
		spider = "/"
	}
	return &realityClient{hello: hello, name: t.ServerName, alpn: alpn, publicKey: pub, shortID: r.ShortID, spiderX: spider, now: time.Now}, nil
}

// realityCheck is the verdict of one handshake's certificate check.
type realityCheck struct {
	authKey  []byte
	name     string
	roots    *x509.CertPool
	verified bool // the server's certificate is the REALITY one
}

// verify accepts the server's temporary certificate, signed by the HMAC of
// the auth key over its public key, and refuses every other: a real chain
// means the hello went to the target site. A chain that verifies lets the
// handshake end (so that the spider can browse it); one that does not fails
// it at once.
func (k *realityCheck) verify(rawCerts [][]byte, _ [][]*x509.Certificate) error {
	if len(rawCerts) == 0 {
		return fmt.Errorf("%w: no certificate", ErrRealityTarget)
	}
	leaf, err := x509.ParseCertificate(rawCerts[0])
	if err != nil {
		return fmt.Errorf("REALITY: the server's certificate: %w", err)
	}
	if pub, ok := leaf.PublicKey.(ed25519.PublicKey); ok {
		mac := hmac.New(sha512.New, k.authKey)
		mac.Write(pub)
		if hmac.Equal(mac.Sum(nil), leaf.Signature) {
			k.verified = true
			return nil
		}
	}
	opts := x509.VerifyOptions{DNSName: k.name, Roots: k.roots, Intermediates: x509.NewCertPool()}
	for _, raw := range rawCerts[1:] {
		if c, err := x509.ParseCertificate(raw); err == nil {
			opts.Intermediates.AddCert(c)
		}
	}
	if _, err := leaf.Verify(opts); err != nil {
		return fmt.Errorf("%w; its certificate: %v", ErrRealityTarget, err)
	}
	return nil
}

// client runs the REALITY handshake over c, bounded by ctx. A server that
// answers as the target site fails it with ErrRealityTarget, after the
// spider has browsed the site over the connection as a browser would
// (within ctx), and no byte of the flow is sent.
func (r *realityClient) client(ctx context.Context, c net.Conn) (net.Conn, error) {
	check := &realityCheck{name: r.name, roots: r.roots}
	cfg := &utls.Config{
		ServerName:             r.name,
		InsecureSkipVerify:     true, // verify below checks every certificate
		VerifyPeerCertificate:  check.verify,
		SessionTicketsDisabled: true,
		MinVersion:             utls.VersionTLS13,

		DynamicRecordSizingDisabled: r.fullRecords,
	}
	uc, err := uClient(c, cfg, r.hello)
	if err != nil {
		return nil, err
	}
	if err := uc.BuildHandshakeState(); err != nil {
		return nil, err
	}
	changed := dropUnsharedHybrid(uc)
	if r.alpn != nil {
		setALPN(uc, r.alpn)
		changed = true
	}
	if changed {
		if err := uc.BuildHandshakeState(); err != nil {
			return nil, err
		}
	}
	key, err := r.seal(uc)
	if err != nil {
		return nil, err
	}
	check.authKey = key
	if err := uc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	if !check.verified {
		r.spider(ctx, uc)
		uc.Close()
		return nil, ErrRealityTarget
	}
	return uc, nil
}

// seal writes the sealed session id into the built ClientHello and returns
// the auth key.
func (r *realityClient) seal(uc *utls.UConn) ([]byte, error) {
	hello := uc.HandshakeState.Hello
	if len(hello.Raw) < sessionIDOffset+32 || len(hello.Random) != 32 {
		return nil, errors.New("REALITY: the ClientHello has no room for the session id")
	}
	keys := uc.HandshakeState.State13.KeyShareKeys
	var priv *ecdh.PrivateKey
	if keys != nil {
		priv = keys.Ecdhe
		if priv == nil {
			priv = keys.MlkemEcdhe
		}
	}
	if priv == nil {
		return nil, fmt.Errorf("REALITY: fingerprint %s sends no X25519 key share (REALITY needs TLS 1.3)", r.hello.Client)
	}
	secret, err := priv.ECDH(r.publicKey)
	if err != nil {
		return nil, fmt.Errorf("REALITY: %w", err)
	}
	key, err := hkdf.Key(sha256.New, secret, hello.Random[:20], "REALITY", 32)
	if err != nil {
		return nil, err
	}
	id := make([]byte, 32)
	id[0], id[1], id[2] = realityVersion[0], realityVersion[1], realityVersion[2]
	binary.BigEndian.PutUint32(id[4:], uint32(r.now().Unix()))
	copy(id[8:], r.shortID[:])
	// The additional data is the hello with a zero session id.
	copy(hello.Raw[sessionIDOffset:sessionIDOffset+32], make([]byte, 32))
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sealed := aead.Seal(id[:0], hello.Random[20:], id[:16], hello.Raw)
	hello.SessionId = sealed
	copy(hello.Raw[sessionIDOffset:], sealed)
	return key, nil
}
