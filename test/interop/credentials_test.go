package interop

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// A wrong password or UUID against the peers, for the protocols whose
// server answers nothing before the destination does: Trojan, VLESS, VMess
// and Shadowsocks (AEAD and 2022). Their client handshake is a header
// written ahead of the first payload, with no reply to wait for, so the
// proxy dial succeeds and the SOCKS5 client is answered with success; the
// server then drops the connection (at once, or after reading a random
// amount as its defence against probing), and the flow must end there:
// the client reads the end of the stream, never an echo, and never hangs.
// Turning this into a dial error would mean holding every flow for a round
// trip to the server, which these protocols are built to avoid.
//
// SOCKS5 and HTTP servers answer the handshake, so a wrong account there is
// a dial error and a SOCKS5 failure reply: TestProxyOutboundWrongAccountInterop.

// wrongCredentialDeadline bounds how long a refused flow may stay open. The
// peers' probe defences read until their handshake timeout at most (Xray: 4 s).
const wrongCredentialDeadline = 20 * time.Second

func TestWrongCredentialInterop(t *testing.T) {
	const wrongUUID = "00000000-1111-4222-8333-444444444444"
	cases := []struct {
		name string
		peer func(t *testing.T, peer string, port int) (config, cert string)
		out  func(port int, cert string) string
	}{
		{"trojan", func(t *testing.T, peer string, port int) (string, string) {
			cert, key := tlsFiles(t)
			return peerConfig(peer, "trojan", port, cert, key), cert
		}, func(port int, cert string) string {
			return fmt.Sprintf("type = \"trojan\"\nserver = \"127.0.0.1:%d\"\npassword = \"wrong\"\n%s\n", port, clientTLS(cert))
		}},
		{"vless", func(t *testing.T, peer string, port int) (string, string) {
			return peerConfig(peer, "vless", port, "", ""), ""
		}, func(port int, _ string) string {
			return fmt.Sprintf("type = \"vless\"\nserver = \"127.0.0.1:%d\"\nuuid = %q\n", port, wrongUUID)
		}},
		{"vmess", func(t *testing.T, peer string, port int) (string, string) {
			return vmessPeerConfig(peer, port), ""
		}, func(port int, _ string) string {
			return fmt.Sprintf("type = \"vmess\"\nserver = \"127.0.0.1:%d\"\nuuid = %q\nsecurity = \"aes-128-gcm\"\n", port, wrongUUID)
		}},
		{"shadowsocks/aes-128-gcm", func(t *testing.T, peer string, port int) (string, string) {
			return ssServer{method: "aes-128-gcm", password: "the right one"}.config(peer, port), ""
		}, func(port int, _ string) string {
			return fmt.Sprintf("type = \"shadowsocks\"\nserver = \"127.0.0.1:%d\"\nmethod = \"aes-128-gcm\"\npassword = \"a wrong one\"\n", port)
		}},
		{"shadowsocks/2022-blake3-aes-128-gcm", func(t *testing.T, peer string, port int) (string, string) {
			return ssServer{method: "2022-blake3-aes-128-gcm", password: ssKey(t, 16)}.config(peer, port), ""
		}, func(port int, _ string) string {
			return fmt.Sprintf("type = \"shadowsocks\"\nserver = \"127.0.0.1:%d\"\nmethod = \"2022-blake3-aes-128-gcm\"\npassword = %q\n", port, ssKey(t, 16))
		}},
	}
	for _, peer := range []string{"xray", "sing-box"} {
		for _, tc := range cases {
			t.Run(peer+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				port := freePort(t)
				config, cert := tc.peer(t, peer, port)
				startPeer(t, peer, config, port)
				proxy := startSwitchyard(t, "[[outbounds]]\ntag = \"proxy\"\n"+tc.out(port, cert), "proxy")
				checkRefusedFlow(t, proxy)
			})
		}
	}
}

// checkRefusedFlow opens a flow to an echo server through proxy and
// requires it to end without an echo within wrongCredentialDeadline.
func checkRefusedFlow(t *testing.T, proxy string) {
	t.Helper()
	start := time.Now()
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		var reply socksclient.ReplyError
		if !errors.As(err, &reply) {
			t.Fatalf("CONNECT: %v", err)
		}
		return // refused at the dial: as good
	}
	defer c.Close()
	c.SetDeadline(start.Add(wrongCredentialDeadline))
	if _, err := c.Write(make([]byte, 4096)); err != nil {
		return // already reset
	}
	n, err := io.Copy(io.Discard, c)
	if n != 0 {
		t.Fatalf("%d bytes came back through a wrong credential", n)
	}
	if isTimeout(err) {
		t.Fatalf("the flow was still open after %v", wrongCredentialDeadline)
	}
	t.Logf("flow ended after %v (%v)", time.Since(start).Round(time.Millisecond), err)
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}
