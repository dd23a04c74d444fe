package interop

import (
	"errors"
	"fmt"
	"testing"

	"switchyard/test/socksclient"
)

// The socks and http outbounds against Xray's and sing-box's socks and http
// inbounds, without and with an account. Every socks case checks TCP (a
// 1 MiB echo) and UDP with two peers, since each SOCKS5 datagram carries its
// own address; http has no UDP. Every peer serves every case: there is no
// case left out.

const (
	interopUser = "alice"
	interopPass = "s3cret-pw"
)

// proxyInbound is the JSON of one peer inbound of kind ("socks" or "http")
// on port, requiring the interop account when auth is set.
func proxyInbound(peer, kind string, port int, auth bool) string {
	switch peer {
	case "xray":
		settings := `"auth":"noauth"`
		if kind == "http" {
			settings = `"allowTransparent":false`
		}
		if auth {
			settings = fmt.Sprintf(`"accounts":[{"user":%q,"pass":%q}]`, interopUser, interopPass)
			if kind == "socks" {
				settings = `"auth":"password",` + settings
			}
		}
		if kind == "socks" {
			settings += `,"udp":true,"ip":"127.0.0.1"`
		}
		return fmt.Sprintf(`{"log":{"loglevel":"warning"},"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":%q,"settings":{%s}}],"outbounds":[{"protocol":"freedom"}]}`,
			port, kind, settings)
	case "sing-box":
		users := ""
		if auth {
			users = fmt.Sprintf(`,"users":[{"username":%q,"password":%q}]`, interopUser, interopPass)
		}
		return fmt.Sprintf(`{"log":{"level":"warn"},"inbounds":[{"type":%q,"listen":"127.0.0.1","listen_port":%d%s}],"outbounds":[{"type":"direct"}]}`,
			kind, port, users)
	}
	panic("unknown peer " + peer)
}

// proxyOutbound is the switchyard outbound table "up" toward port.
func proxyOutbound(kind string, port int, user, pass string) string {
	toml := fmt.Sprintf("[[outbounds]]\ntag = \"up\"\ntype = %q\nserver = \"127.0.0.1:%d\"\n", kind, port)
	if user != "" {
		toml += fmt.Sprintf("username = %q\npassword = %q\n", user, pass)
	}
	return toml
}

func TestSocksOutboundInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		for _, auth := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/auth=%v", peer, auth), func(t *testing.T) {
				port := freePort(t)
				startPeer(t, peer, proxyInbound(peer, "socks", port, auth), port)
				user, pass := "", ""
				if auth {
					user, pass = interopUser, interopPass
				}
				proxy := startSwitchyard(t, proxyOutbound("socks", port, user, pass), "up")
				checkTCP(t, proxy)
				checkUDP(t, proxy, 2)
			})
		}
	}
}

func TestHTTPOutboundInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		for _, auth := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/auth=%v", peer, auth), func(t *testing.T) {
				port := freePort(t)
				startPeer(t, peer, proxyInbound(peer, "http", port, auth), port)
				user, pass := "", ""
				if auth {
					user, pass = interopUser, interopPass
				}
				proxy := startSwitchyard(t, proxyOutbound("http", port, user, pass), "up")
				checkTCP(t, proxy)
			})
		}
	}
}

// A wrong account is refused by the peer during the handshake, so the dial
// fails and the SOCKS client is answered with a failure reply rather than a
// stream that dies later.
func TestProxyOutboundWrongAccountInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		for _, kind := range []string{"socks", "http"} {
			t.Run(peer+"/"+kind, func(t *testing.T) {
				port := freePort(t)
				startPeer(t, peer, proxyInbound(peer, kind, port, true), port)
				proxy := startSwitchyard(t, proxyOutbound(kind, port, interopUser, "wrong"), "up")
				c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
				if err == nil {
					c.Close()
					t.Fatal("CONNECT through a refused account succeeded")
				}
				var reply socksclient.ReplyError
				if !errors.As(err, &reply) {
					t.Fatalf("no failure reply: %v", err)
				}
			})
		}
	}
}
