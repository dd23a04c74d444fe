package transport

import (
	"crypto/ecdh"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	utls "github.com/refraction-networking/utls"

	"switchyard/spec"
)

// helloServer is a TLS echo server that records each ClientHello.
func helloServer(t *testing.T, p *pki, protos []string) (netip.AddrPort, chan *tls.ClientHelloInfo) {
	hellos := make(chan *tls.ClientHelloInfo, 8)
	cfg := p.serverConfig(tls.VersionTLS12, tls.VersionTLS13)
	cfg.NextProtos = protos
	cfg.GetConfigForClient = func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		select {
		case hellos <- h:
		default:
		}
		return nil, nil
	}
	return serveTLS(t, cfg), hellos
}

func isUConn(c net.Conn) bool { _, ok := c.(*utls.UConn); return ok }

// isGREASE reports whether v is an RFC 8701 GREASE value, which browsers
// send and Go never does.
func isGREASE(v uint16) bool { return v&0x0F0F == 0x0A0A && v>>8 == v&0xFF }

// A fingerprint sends the browser's ClientHello and verifies the server as
// the Go client does.
func TestFingerprintHello(t *testing.T) {
	p := newPKI(t)
	for _, tc := range []struct {
		fp, transport string
		wantALPN      []string
	}{
		{"chrome", "", []string{"h2", "http/1.1"}}, // the shape's own list
		{"firefox", "", nil},
		{"safari", "", nil},
		{"ios", "", nil},
		{"edge", "", nil},
		{"random", "", nil},
		{"chrome", "ws", []string{"http/1.1"}},
		{"chrome", "alpn", []string{"x-custom"}},
	} {
		t.Run(tc.fp+"/"+tc.transport, func(t *testing.T) {
			server, hellos := helloServer(t, p, []string{"h2", "http/1.1", "x-custom"})
			tl := &spec.TLS{ServerName: serverName, CAFile: p.caFile, Fingerprint: tc.fp}
			if tc.transport == "alpn" {
				tl.ALPN = []string{"x-custom"}
			}
			d, err := New(spec.Outbound{Server: server.String(), TLS: tl}, deps(nil))
			if err != nil {
				t.Fatal(err)
			}
			if tc.transport == "ws" {
				// The TLS layer alone, as the ws transport sets it up.
				if d.tls, err = newTLSLayer(spec.TLS{ServerName: serverName, CAFile: p.caFile, Fingerprint: tc.fp}, d.server, []string{"http/1.1"}); err != nil {
					t.Fatal(err)
				}
			}
			c, err := d.connect(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if st, ok := c.(*TLSStream); !ok || !isUConn(st.Conn) {
				t.Fatalf("a fingerprint gave a %T", c)
			}
			h := <-hellos
			if h.ServerName != serverName {
				t.Errorf("SNI %q", h.ServerName)
			}
			if tc.fp == "chrome" && !slices.ContainsFunc(h.CipherSuites, isGREASE) {
				t.Errorf("chrome's hello has no GREASE cipher: %x", h.CipherSuites)
			}
			if tc.wantALPN != nil && !slices.Equal(h.SupportedProtos, tc.wantALPN) {
				t.Errorf("ALPN offered %q, want %q", h.SupportedProtos, tc.wantALPN)
			}
		})
	}
}

// The randomized shape may list X25519MLKEM768 without a key share for it;
// against a Go server, which asks for that group in a HelloRetryRequest
// uTLS cannot answer, the group is taken out so every handshake succeeds.
func TestFingerprintRandomAgainstGoServer(t *testing.T) {
	p := newPKI(t)
	server := serveTLS(t, p.serverConfig(tls.VersionTLS12, tls.VersionTLS13))
	d, err := New(spec.Outbound{Server: server.String(), TLS: &spec.TLS{ServerName: serverName, CAFile: p.caFile, Fingerprint: "random"}}, deps(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		c, err := d.connect(t.Context())
		if err != nil {
			t.Fatalf("handshake %d: %v", i, err)
		}
		c.Close()
	}
}

func TestFingerprintVerifies(t *testing.T) {
	p := newPKI(t)
	server, _ := helloServer(t, p, nil)
	out := func(tl spec.TLS) spec.Outbound {
		tl.Fingerprint = "chrome"
		return spec.Outbound{Server: server.String(), TLS: &tl}
	}
	_, err := dial(t, out(spec.TLS{ServerName: serverName}), deps(nil))
	var unknown x509.UnknownAuthorityError
	if !errors.As(err, &unknown) {
		t.Fatalf("unknown authority: %v", err)
	}
	_, err = dial(t, out(spec.TLS{ServerName: "other.test", CAFile: p.caFile}), deps(nil))
	var host x509.HostnameError
	if !errors.As(err, &host) {
		t.Fatalf("wrong name: %v", err)
	}
	c, err := dial(t, out(spec.TLS{ServerName: "anything.test", Insecure: true}), deps(nil))
	if err != nil {
		t.Fatalf("insecure: %v", err)
	}
	c.Close()
	bad := spec.Outbound{Server: server.String(), TLS: &spec.TLS{Fingerprint: "netscape"}}
	if _, err := New(bad, deps(nil)); err == nil || !strings.Contains(err.Error(), `unknown tls fingerprint "netscape"`) {
		t.Fatalf("unknown fingerprint: %v", err)
	}
}

// A fingerprinted hello carries the transports too: ws over TLS gets
// http/1.1, gRPC gets h2.
func TestFingerprintUnderTransports(t *testing.T) {
	p := newPKI(t)
	t.Run("grpc", func(t *testing.T) {
		srv := newGRPCServer(t, p, []string{"h2"}, grpcEcho(false, "0"))
		o := grpcOutbound(p, srv.addr, spec.Transport{})
		o.TLS.Fingerprint = "chrome"
		d := newDialer(t, o)
		c := dialCtx(t, d)
		defer c.Close()
		echoRoundTrip(t, c, 1000)
	})
	t.Run("ws", func(t *testing.T) {
		var seen wsRequests
		server := wsEchoServer(t, p.serverConfig(tls.VersionTLS12, tls.VersionTLS13), "", &seen)
		c, err := dial(t, wsOutbound(server, spec.Transport{}, &spec.TLS{ServerName: serverName, CAFile: p.caFile, Fingerprint: "chrome"}), deps(nil))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echoRoundTrip(t, c, 1000)
		if got := seen.last(t).TLS.NegotiatedProtocol; got != "http/1.1" {
			t.Fatalf("ALPN %q", got)
		}
	})
}

// helloExtensions builds a ClientHello on uc and returns its extensions'
// types, sorted (chrome shuffles their order), and its GREASE ECH
// extension.
func helloExtensions(t testing.TB, uc *utls.UConn) ([]string, *utls.GREASEEncryptedClientHelloExtension) {
	t.Helper()
	if err := uc.BuildHandshakeState(); err != nil {
		t.Fatal(err)
	}
	var types []string
	var grease *utls.GREASEEncryptedClientHelloExtension
	for _, ext := range uc.Extensions {
		types = append(types, fmt.Sprintf("%T", ext))
		if g, ok := ext.(*utls.GREASEEncryptedClientHelloExtension); ok {
			grease = g
		}
	}
	slices.Sort(types)
	return types, grease
}

// uClient's hello is the shape's, extension for extension, and its GREASE
// ECH extension carries a fresh X25519 public key each time as its
// encapsulated key, as uTLS's own does.
func TestUClientShape(t *testing.T) {
	cfg := &utls.Config{ServerName: "example.com"}
	for _, name := range []string{"chrome", "firefox", "safari", "edge", "random"} {
		id := fingerprints[name]
		want, wantGrease := helloExtensions(t, utls.UClient(nil, cfg.Clone(), id))
		var keys [][]byte
		for range 2 {
			uc, err := uClient(nil, cfg.Clone(), id)
			if err != nil {
				t.Fatal(err)
			}
			got, grease := helloExtensions(t, uc)
			if name != "random" && !slices.Equal(got, want) {
				t.Fatalf("%s: extensions %v, want %v", name, got, want)
			}
			if (grease == nil) != (wantGrease == nil) {
				t.Fatalf("%s: GREASE ECH %v, want %v", name, grease != nil, wantGrease != nil)
			}
			if grease == nil {
				continue
			}
			if len(grease.EncapsulatedKey) != len(wantGrease.EncapsulatedKey) {
				t.Fatalf("%s: encapsulated key of %d bytes, want %d", name, len(grease.EncapsulatedKey), len(wantGrease.EncapsulatedKey))
			}
			if _, err := ecdh.X25519().NewPublicKey(grease.EncapsulatedKey); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, grease.EncapsulatedKey)
		}
		if len(keys) == 2 && slices.Equal(keys[0], keys[1]) {
			t.Fatalf("%s: the same encapsulated key twice", name)
		}
	}
}

// BenchmarkChromeHello builds a chrome ClientHello as uTLS does alone and
// as uClient does.
func BenchmarkChromeHello(b *testing.B) {
	cfg := &utls.Config{ServerName: "example.com"}
	b.Run("utls", func(b *testing.B) {
		for b.Loop() {
			helloExtensions(b, utls.UClient(nil, cfg.Clone(), utls.HelloChrome_Auto))
		}
	})
	b.Run("uClient", func(b *testing.B) {
		for b.Loop() {
			uc, err := uClient(nil, cfg.Clone(), utls.HelloChrome_Auto)
			if err != nil {
				b.Fatal(err)
			}
			helloExtensions(b, uc)
		}
	})
}
