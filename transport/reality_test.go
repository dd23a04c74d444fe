package transport

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/internal/testcert"
	"switchyard/netx"
	"switchyard/spec"
)

// targetSite is a TLS 1.3 site as a REALITY server forwards a stranger to:
// its own certificate, h2 and http/1.1, a page. It counts its requests and
// returns the pool that trusts it.
func targetSite(t *testing.T, alpn []string) (string, *x509.CertPool, *atomic.Int32) {
	t.Helper()
	cert := testcert.New(t, "site.test")
	ln, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert.Certificate}, MinVersion: tls.VersionTLS13, NextProtos: alpn})
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/spider" && r.Header.Get("User-Agent") != "" {
			hits.Add(1)
		}
		io.WriteString(w, "<html>site</html>")
	}), ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	leaf, err := x509.ParseCertificate(cert.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return ln.Addr().String(), pool, &hits
}

func realityFor(t *testing.T, roots *x509.CertPool) *realityClient {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ts := spec.TLS{ServerName: "site.test", Reality: &spec.Reality{ShortID: [8]byte{1, 2}, SpiderX: "/spider"}}
	copy(ts.Reality.PublicKey[:], k.PublicKey().Bytes())
	r, err := newRealityClient(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.roots = roots
	return r
}

// A server that answers with the target site's own certificate, one that
// verifies, is not the REALITY server: the client browses the site as
// spider_x says, over that connection, and fails the dial with the REALITY
// error, within the deadline. An untrusted certificate fails it at once.
func TestRealityDetectsTheTargetSite(t *testing.T) {
	for _, alpn := range [][]string{{"h2", "http/1.1"}, {"http/1.1"}} {
		t.Run(alpn[0], func(t *testing.T) {
			addr, pool, hits := targetSite(t, alpn)
			for _, trusted := range []bool{true, false} {
				roots := pool
				if !trusted {
					roots = x509.NewCertPool()
				}
				r := realityFor(t, roots)
				before := hits.Load()
				c, err := net.Dial("tcp4", addr)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				start := time.Now()
				tc, err := r.client(ctx, c)
				cancel()
				c.Close()
				if err == nil {
					tc.Close()
					t.Fatal("the target site was taken for the REALITY server")
				}
				if fault, _ := netx.FaultOf(err); !errors.Is(err, ErrRealityTarget) || fault != netx.FaultProxyAuth {
					t.Fatalf("trusted %v: %v", trusted, err)
				}
				if d := time.Since(start); d > 3*time.Second {
					t.Fatalf("took %v", d)
				}
				want := int32(0)
				if trusted {
					want = 1
				}
				if got := hits.Load() - before; got != want {
					t.Fatalf("trusted %v: the spider made %d requests, want %d", trusted, got, want)
				}
			}
		})
	}
}

// The session id is sealed as a REALITY server opens it: the auth key from
// the server's private key and the hello's key share, the version, time and
// short id under AES-GCM with the hello as additional data.
func TestRealitySessionIDOpens(t *testing.T) {
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ts := spec.TLS{ServerName: "site.test", Reality: &spec.Reality{ShortID: [8]byte{0x6b, 0xa8}}}
	copy(ts.Reality.PublicKey[:], priv.PublicKey().Bytes())
	r, err := newRealityClient(ts, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.now = func() time.Time { return time.Unix(1_800_000_000, 0) }
	hellos := make(chan []byte, 1)
	a, b := net.Pipe()
	go func() {
		buf := make([]byte, 4096)
		n, _ := io.ReadAtLeast(b, buf, 5)
		hellos <- buf[:n]
		b.Close()
	}()
	r.client(context.Background(), a)
	a.Close()
	rec := <-hellos
	if err := openRealityHello(priv, rec[5:], [3]byte{26, 3, 27}, 1_800_000_000, [8]byte{0x6b, 0xa8}); err != nil {
		t.Fatal(err)
	}
}

// openRealityHello opens the session id of a ClientHello message as the
// server does and checks what it carries.
func openRealityHello(priv *ecdh.PrivateKey, msg []byte, version [3]byte, unix uint32, shortID [8]byte) error {
	if len(msg) < sessionIDOffset+32 || msg[0] != 1 || msg[sessionIDOffset-1] != 32 {
		return errors.New("not a hello with a 32-byte session id")
	}
	random := msg[6:38]
	sid := append([]byte(nil), msg[sessionIDOffset:sessionIDOffset+32]...)
	p := msg[sessionIDOffset+32:]
	skip := func(lenBytes int) bool {
		if len(p) < lenBytes {
			return false
		}
		n := 0
		for _, b := range p[:lenBytes] {
			n = n<<8 | int(b)
		}
		if len(p) < lenBytes+n {
			return false
		}
		p = p[lenBytes+n:]
		return true
	}
	if !skip(2) || !skip(1) || len(p) < 2 { // cipher suites, compression
		return errors.New("short hello")
	}
	exts := p[2:]
	var share []byte
	for len(exts) >= 4 {
		typ, n := int(exts[0])<<8|int(exts[1]), int(exts[2])<<8|int(exts[3])
		if len(exts) < 4+n {
			return errors.New("cut extension")
		}
		body := exts[4 : 4+n]
		exts = exts[4+n:]
		if typ != 0x33 || len(body) < 2 {
			continue
		}
		for ks := body[2:]; len(ks) >= 4; {
			g, m := int(ks[0])<<8|int(ks[1]), int(ks[2])<<8|int(ks[3])
			if len(ks) < 4+m {
				break
			}
			switch {
			case g == 0x1d && m == 32:
				share = ks[4 : 4+m]
			case g == 0x11ec && share == nil && m > 32:
				share = ks[4+m-32 : 4+m]
			}
			ks = ks[4+m:]
		}
	}
	if share == nil {
		return errors.New("no X25519 key share")
	}
	pub, err := ecdh.X25519().NewPublicKey(share)
	if err != nil {
		return err
	}
	secret, err := priv.ECDH(pub)
	if err != nil {
		return err
	}
	key, err := hkdf.Key(sha256.New, secret, random[:20], "REALITY", 32)
	if err != nil {
		return err
	}
	block, _ := aes.NewCipher(key)
	aead, _ := cipher.NewGCM(block)
	aad := append([]byte(nil), msg...)
	clear(aad[sessionIDOffset : sessionIDOffset+32])
	plain, err := aead.Open(nil, random[20:], sid, aad)
	if err != nil {
		return fmt.Errorf("the session id does not open: %w", err)
	}
	if [3]byte(plain[:3]) != version || plain[3] != 0 || binary.BigEndian.Uint32(plain[4:8]) != unix || [8]byte(plain[8:16]) != shortID {
		return fmt.Errorf("the session id carries %x", plain)
	}
	return nil
}
