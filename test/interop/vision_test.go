package interop

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/internal/testcert"
	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/outbound/vless"
	"switchyard/relay"
	"switchyard/spec"
	"switchyard/test/socksclient"
)

// The VLESS Vision flow against Xray and sing-box servers, over plain TLS
// and over REALITY: the 1 MiB echo and XUDP with two peers when the inner
// traffic is not TLS (padding that ends with End), and a 1 MiB echo inside
// an inner TLS 1.3 session (padding that ends with Direct: both ends step
// down to the TCP conn under the outer TLS).
//
//	peer      outer    TCP 1 MiB  UDP (2 peers)  inner TLS 1 MiB  splice after Direct
//	xray      tls      yes        yes            yes              yes
//	xray      reality  yes        yes            yes              yes
//	sing-box  tls      yes        yes            yes              -
//	sing-box  reality  yes        yes            yes              -

// visionPeer is a VLESS inbound with the Vision flow over TLS.
func visionPeer(peer string, port int, cert, key string) string {
	if peer == "xray" {
		return fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":"vless",`+
			`"settings":{"clients":[{"id":%q,"flow":"xtls-rprx-vision"}],"decryption":"none"},%s}],"outbounds":[{"protocol":"freedom"}]}`,
			port, interopUUID, peerTLS(peer, cert, key))
	}
	return fmt.Sprintf(`{"log":{"level":"warn"},"inbounds":[{"type":"vless","listen":"127.0.0.1","listen_port":%d,"users":[{"uuid":%q,"flow":"xtls-rprx-vision"}],%s}],"outbounds":[{"type":"direct"}]}`,
		port, interopUUID, peerTLS(peer, cert, key))
}

// innerTLSEcho is a TLS 1.3 echo server: the inner TLS a Vision flow
// carries. It returns its address and the pool that trusts it.
func innerTLSEcho(t *testing.T) (string, *x509.CertPool) {
	t.Helper()
	cert := testcert.New(t, "inner.test")
	ln, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert.Certificate}, MinVersion: tls.VersionTLS13})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	leaf, err := x509.ParseCertificate(cert.Certificate.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return ln.Addr().String(), pool
}

// innerTLSRoundTrip runs a TLS 1.3 client over c toward the inner echo: a
// short request and its answer first, as an HTTPS exchange starts (each
// side's first application data in records read whole, where Xray's side
// steps down), then 1 MiB back byte for byte.
func innerTLSRoundTrip(t *testing.T, c net.Conn, pool *x509.CertPool) {
	t.Helper()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	tc := tls.Client(c, &tls.Config{ServerName: "inner.test", RootCAs: pool, MinVersion: tls.VersionTLS13})
	if err := tc.Handshake(); err != nil {
		t.Fatalf("inner TLS handshake: %v", err)
	}
	hello := make([]byte, 5)
	if _, err := tc.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(tc, hello); err != nil || string(hello) != "hello" {
		t.Fatalf("the first answer %q: %v", hello, err)
	}
	payload := make([]byte, 1<<20)
	rand.Read(payload)
	errc := make(chan error, 1)
	go func() { _, err := tc.Write(payload); errc <- err }()
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(tc, got); err != nil {
		t.Fatalf("reading the inner echo: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("writing: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatal("1 MiB inner TLS echo differs")
	}
}

// checkInnerTLS is the inner TLS round trip through the SOCKS5 proxy.
func checkInnerTLS(t *testing.T, proxy string) {
	t.Helper()
	echo, pool := innerTLSEcho(t)
	c, err := socksclient.Dial(proxy, echo, "", "")
	if err != nil {
		t.Fatalf("CONNECT %s through switchyard: %v", echo, err)
	}
	defer c.Close()
	innerTLSRoundTrip(t, c, pool)
}

func TestVisionInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		t.Run(peer+"/tls", func(t *testing.T) {
			cert, key := tlsFiles(t)
			port := freePort(t)
			startPeer(t, peer, visionPeer(peer, port, cert, key), port)
			proxy := startSwitchyard(t, fmt.Sprintf(`
[[outbounds]]
tag = "proxy"
type = "vless"
server = "127.0.0.1:%d"
uuid = %q
flow = "xtls-rprx-vision"
%s
`, port, interopUUID, clientTLS(cert)), "proxy")
			t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
			t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, 2) })
			t.Run("inner tls", func(t *testing.T) { checkInnerTLS(t, proxy) })
		})
		t.Run(peer+"/reality", func(t *testing.T) {
			target := realityTarget(t)
			priv, pub := realityKeys(t)
			port := freePort(t)
			startPeer(t, peer, realityPeer(peer, port, priv, target, "xtls-rprx-vision"), port)
			proxy := startSwitchyard(t, realityOutbound(port, pub, realityShortID, "xtls-rprx-vision", ""), "proxy")
			t.Run("inner tls", func(t *testing.T) { checkInnerTLS(t, proxy) })
		})
	}
}

// Once the inner TLS carries application data, both directions of a
// Vision flow over plain TLS or REALITY step down to the TCP conn under the
// outer TLS and the relay splices them: the zero-copy path, as the relay
// tests assert it.
func TestVisionSplicesInnerTLS(t *testing.T) {
	cert, key := tlsFiles(t)
	for _, outer := range []string{"tls", "reality"} {
		t.Run(outer, func(t *testing.T) {
			port := freePort(t)
			o := spec.Outbound{Tag: "v", Type: "vless", Server: fmt.Sprintf("127.0.0.1:%d", port), UUID: interopUUID, Flow: "xtls-rprx-vision"}
			if outer == "tls" {
				startPeer(t, "xray", visionPeer("xray", port, cert, key), port)
				o.TLS = &spec.TLS{ServerName: interopHost, CAFile: cert}
			} else {
				priv, pub := realityKeys(t)
				startPeer(t, "xray", realityPeer("xray", port, priv, realityTarget(t), "xtls-rprx-vision"), port)
				o.TLS = &spec.TLS{ServerName: interopHost, Fingerprint: "chrome", Reality: &spec.Reality{}}
				copy(o.TLS.Reality.PublicKey[:], mustRawURL(t, pub))
				copy(o.TLS.Reality.ShortID[:], []byte{0x6b, 0xa8, 0x51, 0x79, 0xe3, 0x0d, 0x4f, 0xc2})
			}
			ob, err := vless.New(o, outbound.Deps{Dialer: netx.NewDialer(netx.SocketPolicy{}, 5*time.Second), Servers: netx.SystemResolver{}})
			if err != nil {
				t.Fatal(err)
			}
			defer ob.Close()
			echo, pool := innerTLSEcho(t)
			up, err := ob.DialStream(context.Background(), netx.Flow{Dst: mustAddr(t, echo)})
			if err != nil {
				t.Fatal(err)
			}
			client, inbound := loopbackPair(t)
			done := make(chan relay.Result, 1)
			go func() { done <- relay.Pipe(context.Background(), inbound, up, time.Minute) }()
			innerTLSRoundTrip(t, client, pool)
			client.Close()
			var res relay.Result
			select {
			case res = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("the relay did not end")
			}
			if res.PathAToB != relay.PathSplice || res.PathBToA != relay.PathSplice {
				t.Fatalf("paths %v and %v, want splice both ways once the inner TLS carries data", res.PathAToB, res.PathBToA)
			}
		})
	}
}

func mustAddr(t *testing.T, s string) netx.Addr {
	t.Helper()
	a, err := netx.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// loopbackPair is two ends of a loopback TCP connection.
func loopbackPair(t *testing.T) (*net.TCPConn, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() { c, _ := ln.AcceptTCP(); accepted <- c }()
	c, err := net.DialTCP("tcp4", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}
