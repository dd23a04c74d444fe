package interop

import (
	"fmt"
	"testing"

	"switchyard/internal/testcert"
)

// The Trojan and VLESS clients against Xray and sing-box servers.
//
//	peer      protocol  transport  TCP 1 MiB  UDP                      UDP xudp (2 peers)
//	xray      trojan    tls        yes        yes, 2 peers             -
//	sing-box  trojan    tls        yes        yes, 2 peers             -
//	xray      vless     tcp, tls   yes        yes, 1 peer (one target) yes
//	sing-box  vless     tcp, tls   yes        yes, 1 peer (one target) yes
//
// Every case runs against both peers; none is left out.

const (
	interopUUID     = "b831381d-6324-4d53-ad4f-8cda48b30811"
	interopPassword = "interop-secret"
	interopHost     = "interop.test"
)

// tlsFiles writes a self-signed certificate for interopHost and its key as
// PEM files and returns their paths. The certificate is its own CA, so a
// client given it as ca_file verifies the server.
func tlsFiles(t *testing.T) (cert, key string) {
	c := testcert.New(t, interopHost)
	return c.CertFile, c.KeyFile
}

// peerTLS is the TLS part of a server inbound: none when cert is "".
func peerTLS(peer, cert, key string) string {
	switch {
	case cert == "" && peer == "xray":
		return `"streamSettings":{"network":"tcp","security":"none"}`
	case cert == "":
		return `"tls":{"enabled":false}`
	case peer == "xray":
		return fmt.Sprintf(`"streamSettings":{"network":"tcp","security":"tls","tlsSettings":{"certificates":[{"certificateFile":%q,"keyFile":%q}]}}`, cert, key)
	}
	return fmt.Sprintf(`"tls":{"enabled":true,"certificate_path":%q,"key_path":%q}`, cert, key)
}

// peerConfig is a server config with one inbound of protocol on port.
func peerConfig(peer, protocol string, port int, cert, key string) string {
	var users string
	switch {
	case peer == "xray" && protocol == "trojan":
		users = fmt.Sprintf(`"settings":{"clients":[{"password":%q}]}`, interopPassword)
	case peer == "xray":
		users = fmt.Sprintf(`"settings":{"clients":[{"id":%q}],"decryption":"none"}`, interopUUID)
	case protocol == "trojan":
		users = fmt.Sprintf(`"users":[{"password":%q}]`, interopPassword)
	default:
		users = fmt.Sprintf(`"users":[{"uuid":%q}]`, interopUUID)
	}
	tls := peerTLS(peer, cert, key)
	if peer == "xray" {
		return fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":%q,%s,%s}],"outbounds":[{"protocol":"freedom"}]}`,
			port, protocol, users, tls)
	}
	return fmt.Sprintf(`{"log":{"level":"warn"},"inbounds":[{"type":%q,"listen":"127.0.0.1","listen_port":%d,%s,%s}],"outbounds":[{"type":"direct"}]}`,
		protocol, port, users, tls)
}

// clientTLS is switchyard's tls key for a server with cert: verified against
// it as the CA, or none.
func clientTLS(cert string) string {
	if cert == "" {
		return ""
	}
	return fmt.Sprintf("tls = { server_name = %q, ca_file = %q }", interopHost, cert)
}

func TestTrojanInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		t.Run(peer, func(t *testing.T) {
			cert, key := tlsFiles(t)
			port := freePort(t)
			startPeer(t, peer, peerConfig(peer, "trojan", port, cert, key), port)
			proxy := startSwitchyard(t, fmt.Sprintf(`
[[outbounds]]
tag = "proxy"
type = "trojan"
server = "127.0.0.1:%d"
password = %q
%s
`, port, interopPassword, clientTLS(cert)), "proxy")
			t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
			t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, 2) })
		})
	}
}

func TestVLESSInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		for _, security := range []string{"tcp", "tls"} {
			t.Run(peer+"/"+security, func(t *testing.T) {
				var cert, key string
				if security == "tls" {
					cert, key = tlsFiles(t)
				}
				port := freePort(t)
				startPeer(t, peer, peerConfig(peer, "vless", port, cert, key), port)
				outbound := func(encoding string) string {
					return fmt.Sprintf(`
[[outbounds]]
tag = "proxy"
type = "vless"
server = "127.0.0.1:%d"
uuid = %q
packet_encoding = %q
%s
`, port, interopUUID, encoding, clientTLS(cert))
				}
				plain := startSwitchyard(t, outbound(""), "proxy")
				t.Run("tcp", func(t *testing.T) { checkTCP(t, plain) })
				t.Run("udp", func(t *testing.T) { checkUDP(t, plain, 1) })
				xudp := startSwitchyard(t, outbound("xudp"), "proxy")
				t.Run("xudp/tcp", func(t *testing.T) { checkTCP(t, xudp) })
				t.Run("xudp/udp", func(t *testing.T) { checkUDP(t, xudp, 2) })
			})
		}
	}
}
