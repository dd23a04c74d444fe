package interop

import (
	"fmt"
	"testing"
)

// The Hysteria 2 client against Xray's hysteria inbound (version 2) and
// sing-box's hysteria2 inbound, over QUIC with a test-generated certificate
// given to switchyard as its ca_file.
//
//	peer      obfs        TCP 1 MiB  UDP (2 peers, one association)
//	xray      none        yes        no, see below
//	xray      salamander  yes        no, see below
//	sing-box  none        yes        yes
//	sing-box  salamander  yes        yes
//
// UDP against Xray is the one case left out: Xray's server cannot answer.
// The Hysteria authors' client (core/v2 v2.12.2) leaves the QUIC transport
// parameter max_datagram_frame_size out of its handshake (it shapes the
// handshake like Chrome's) and relies on the server assuming datagram
// support, as Hysteria's own server and sing-box do. Xray v1.260327.0 is
// built on a quic-go fork from before that assumption existed, so it takes
// the client's datagrams, forwards them, and then refuses to send any
// datagram back ("datagram support disabled"): no reply ever arrives.

const hy2ObfsPassword = "interop-obfs-secret"

// hy2PeerConfig is a Hysteria 2 server on UDP port, with Salamander when
// obfs is set.
func hy2PeerConfig(peer string, port int, cert, key string, obfs bool) string {
	if peer == "xray" {
		mask := ""
		if obfs {
			mask = fmt.Sprintf(`,"finalmask":{"udp":[{"type":"salamander","settings":{"password":%q}}]}`, hy2ObfsPassword)
		}
		return fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":"hysteria",`+
			`"settings":{"version":2,"clients":[{"auth":%q}]},`+
			`"streamSettings":{"network":"hysteria","hysteriaSettings":{"version":2},"security":"tls",`+
			`"tlsSettings":{"alpn":["h3"],"certificates":[{"certificateFile":%q,"keyFile":%q}]}%s}}],`+
			`"outbounds":[{"protocol":"freedom"}]}`,
			port, interopPassword, cert, key, mask)
	}
	obfsJSON := ""
	if obfs {
		obfsJSON = fmt.Sprintf(`"obfs":{"type":"salamander","password":%q},`, hy2ObfsPassword)
	}
	return fmt.Sprintf(`{"log":{"level":"warn"},"inbounds":[{"type":"hysteria2","listen":"127.0.0.1","listen_port":%d,`+
		`"users":[{"password":%q}],%s`+
		`"tls":{"enabled":true,"alpn":["h3"],"certificate_path":%q,"key_path":%q}}],`+
		`"outbounds":[{"type":"direct"}]}`,
		port, interopPassword, obfsJSON, cert, key)
}

func TestHysteria2Interop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		for _, obfs := range []bool{false, true} {
			name := peer + "/plain"
			if obfs {
				name = peer + "/salamander"
			}
			t.Run(name, func(t *testing.T) {
				cert, key := tlsFiles(t)
				port := freePort(t)
				startPeer(t, peer, hy2PeerConfig(peer, port, cert, key, obfs), 0) // UDP only: no TCP port to wait for
				obfsTOML := ""
				if obfs {
					obfsTOML = fmt.Sprintf("obfs = { type = \"salamander\", password = %q }", hy2ObfsPassword)
				}
				proxy := startSwitchyard(t, fmt.Sprintf(`
[[outbounds]]
tag = "proxy"
type = "hysteria2"
server = "127.0.0.1:%d"
password = %q
%s
tls = { server_name = %q, ca_file = %q }
`, port, interopPassword, obfsTOML, interopHost, cert), "proxy")
				t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
				if peer != "xray" {
					t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, 2) })
				}
			})
		}
	}
}
