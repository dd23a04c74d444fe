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
//	xray      none        yes        yes, datagrams up to 1100 bytes, see below
//	xray      salamander  yes        yes, datagrams up to 1100 bytes, see below
//	sing-box  none        yes        yes, 1..1400 bytes
//	sing-box  salamander  yes        yes, 1..1400 bytes
//
// Against Xray, UDP is checked only with datagrams that fit one QUIC
// datagram. A larger one is split into Hysteria 2 fragments by the client
// (core/v2, as the protocol says), and Xray v1.260327.0's server reassembles
// fragments wrongly: proxy/hysteria's ParseUDPMessage leaves a message's
// data pointing into the read buffer, and its Defragger keeps that message
// while the next read overwrites the buffer, so the first fragment's bytes
// are replaced by the next datagram's and the target receives garbage (or,
// once the buffer is reused by a shorter read, nothing useful). The
// fragmentation itself is proven against sing-box and against Hysteria's
// own server in outbound/hysteria2's tests.

const hy2ObfsPassword = "interop-obfs-secret"

// hy2XraySizes are the UDP sizes checked against Xray: every one fits a
// single QUIC datagram of a fresh connection (about 1200 bytes with the
// client's 1250-byte packets).
var hy2XraySizes = []int{1, 2, 100, 512, 1000, 1100}

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
				t.Run("udp", func(t *testing.T) {
					if peer == "xray" {
						checkUDPSizes(t, proxy, udpEchoes(t, 2), hy2XraySizes)
						return
					}
					checkUDP(t, proxy, 2)
				})
			})
		}
	}
}
