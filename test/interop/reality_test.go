package interop

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"switchyard/internal/testcert"
	"switchyard/test/socksclient"
)

// The VLESS client over REALITY against Xray and sing-box REALITY servers
// whose target site is a TLS server the test runs.
//
//	peer      flow              TCP 1 MiB  UDP (xudp, 2 peers)  refusals
//	xray      "", vision        yes        yes                  key, short id
//	sing-box  "", vision        yes        yes                  key, short id
//	xray      "" over grpc      yes        yes                  -

const realityShortID = "6ba85179e30d4fc2"

// realityKeys is a REALITY server's X25519 key pair, base64url without
// padding as both servers and the client write them.
func realityKeys(t *testing.T) (priv, pub string) {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(k.Bytes()), base64.RawURLEncoding.EncodeToString(k.PublicKey().Bytes())
}

// realityTarget is the site a REALITY server borrows its handshake from and
// forwards every other client to: TLS 1.3 with h2 and http/1.1, serving a
// page. Its handshake timeout is long, as a real site's: an Xray REALITY
// server holds its first connections for 5 s while it learns the site's
// post-handshake records, and closes a client's connection if the site
// gives up on the forwarded handshake meanwhile.
func realityTarget(t *testing.T) string {
	t.Helper()
	cert := testcert.New(t, interopHost)
	ln, err := tls.Listen("tcp4", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert.Certificate},
		MinVersion:   tls.VersionTLS13,
		NextProtos:   []string{"h2", "http/1.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<html><a href="/about">about</a></html>`)
	}), ReadHeaderTimeout: time.Minute, ErrorLog: log.New(io.Discard, "", 0)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// realityPeer is a VLESS inbound over REALITY: flow "" or vision.
func realityPeer(peer string, port int, priv, target, flow string) string {
	if peer == "xray" {
		return fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":"vless",`+
			`"settings":{"clients":[{"id":%q,"flow":%q}],"decryption":"none"},`+
			`"streamSettings":{"network":"tcp","security":"reality","realitySettings":{"target":%q,"serverNames":[%q],"privateKey":%q,"shortIds":[%q]}}}],`+
			`"outbounds":[{"protocol":"freedom"}]}`, port, interopUUID, flow, target, interopHost, priv, realityShortID)
	}
	host, tport, _ := net.SplitHostPort(target)
	return fmt.Sprintf(`{"log":{"level":"warn"},"inbounds":[{"type":"vless","listen":"127.0.0.1","listen_port":%d,"users":[{"uuid":%q,"flow":%q}],`+
		`"tls":{"enabled":true,"server_name":%q,"reality":{"enabled":true,"handshake":{"server":%q,"server_port":%s},"private_key":%q,"short_id":[%q]}}}],`+
		`"outbounds":[{"type":"direct"}]}`, port, interopUUID, flow, interopHost, host, tport, priv, realityShortID)
}

// realityOutbound is switchyard's VLESS outbound over REALITY.
func realityOutbound(port int, pub, shortID, flow, encoding string) string {
	return fmt.Sprintf(`
[dial]
connect_timeout = "3s"

[[outbounds]]
tag = "proxy"
type = "vless"
server = "127.0.0.1:%d"
uuid = %q
flow = %q
packet_encoding = %q
tls = { reality = { public_key = %q, short_id = %q, server_name = %q } }
`, port, interopUUID, flow, encoding, pub, shortID, interopHost)
}

func TestRealityInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		for _, flow := range []string{"", "xtls-rprx-vision"} {
			name := peer + "/plain"
			if flow != "" {
				name = peer + "/vision"
			}
			t.Run(name, func(t *testing.T) {
				target := realityTarget(t)
				priv, pub := realityKeys(t)
				port := freePort(t)
				startPeer(t, peer, realityPeer(peer, port, priv, target, flow), port)
				proxy := startSwitchyard(t, realityOutbound(port, pub, realityShortID, flow, "xudp"), "proxy")
				t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
				t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, 2) })
			})
		}
	}
}

// A client with another public key or short id is, to the REALITY server,
// a visitor of the target site: the server forwards it there, the client
// sees the site's certificate and fails the flow within the deadline, and
// no byte of the flow reaches anyone.
func TestRealityRefusals(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		t.Run(peer, func(t *testing.T) {
			target := realityTarget(t)
			priv, pub := realityKeys(t)
			_, otherPub := realityKeys(t)
			port := freePort(t)
			startPeer(t, peer, realityPeer(peer, port, priv, target, ""), port)
			cases := map[string]string{
				"public key": realityOutbound(port, otherPub, realityShortID, "", ""),
				"short id":   realityOutbound(port, pub, "0123456789abcdef", "", ""),
			}
			for name, outbound := range cases {
				t.Run(name, func(t *testing.T) {
					proxy := startSwitchyard(t, outbound, "proxy")
					echo := tcpEcho(t)
					start := time.Now()
					c, err := socksclient.DialWithin(proxy, echo, "", "", 10*time.Second)
					if err == nil {
						c.Close()
						t.Fatal("a flow went through with a wrong " + name)
					}
					if _, ok := err.(socksclient.ReplyError); !ok {
						t.Fatalf("no failure reply: %v", err)
					}
					if d := time.Since(start); d > 6*time.Second {
						t.Fatalf("the failure took %v, beyond the 3s connect deadline", d)
					}
				})
			}
		})
	}
}

// mustRawURL decodes base64url without padding.
func mustRawURL(t *testing.T, s string) []byte {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// VLESS over gRPC under REALITY, as Xray servers offer it: the HTTP/2 of
// gRPC runs on the REALITY handshake's h2.
func TestRealityGRPCInterop(t *testing.T) {
	target := realityTarget(t)
	priv, pub := realityKeys(t)
	port := freePort(t)
	startPeer(t, "xray", fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":"vless",`+
		`"settings":{"clients":[{"id":%q}],"decryption":"none"},`+
		`"streamSettings":{"network":"grpc","grpcSettings":{"serviceName":"svc"},"security":"reality","realitySettings":{"target":%q,"serverNames":[%q],"privateKey":%q,"shortIds":[%q]}}}],`+
		`"outbounds":[{"protocol":"freedom"}]}`, port, interopUUID, target, interopHost, priv, realityShortID), port)
	proxy := startSwitchyard(t, fmt.Sprintf(`
[[outbounds]]
tag = "proxy"
type = "vless"
server = "127.0.0.1:%d"
uuid = %q
packet_encoding = "xudp"
transport = { type = "grpc", service_name = "svc" }
tls = { reality = { public_key = %q, short_id = %q, server_name = %q } }
`, port, interopUUID, pub, realityShortID, interopHost), "proxy")
	t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
	t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, 2) })
}

// VLESS over XHTTP under REALITY, the deployment Xray now recommends: the
// HTTP/2 of XHTTP runs on the REALITY handshake, in each mode the server
// takes.
func TestRealityXHTTPInterop(t *testing.T) {
	target := realityTarget(t)
	priv, pub := realityKeys(t)
	for _, mode := range []string{"auto", "stream-one", "stream-up", "packet-up"} {
		t.Run(mode, func(t *testing.T) {
			port := freePort(t)
			startPeer(t, "xray", fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":"vless",`+
				`"settings":{"clients":[{"id":%q}],"decryption":"none"},`+
				`"streamSettings":{"network":"xhttp","xhttpSettings":{"path":"/xh","mode":%q},"security":"reality","realitySettings":{"target":%q,"serverNames":[%q],"privateKey":%q,"shortIds":[%q]}}}],`+
				`"outbounds":[{"protocol":"freedom"}]}`, port, interopUUID, mode, target, interopHost, priv, realityShortID), port)
			proxy := startSwitchyard(t, fmt.Sprintf(`
[[outbounds]]
tag = "proxy"
type = "vless"
server = "127.0.0.1:%d"
uuid = %q
packet_encoding = "xudp"
transport = { type = "xhttp", path = "/xh", mode = %q }
tls = { reality = { public_key = %q, short_id = %q, server_name = %q } }
`, port, interopUUID, mode, pub, realityShortID, interopHost), "proxy")
			t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
			t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, 2) })
		})
	}
}
