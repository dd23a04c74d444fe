package interop

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// The VMess client (AEAD header, alterId 0) against Xray's and sing-box's
// vmess inbounds over TCP, for every security, with global padding on (the
// default) and, for the AEAD securities, off.
//
//	peer      security            global_padding  TCP 1 MiB  UDP (1 peer: one target per link)
//	xray      auto                on              yes        yes
//	xray      aes-128-gcm         on, off         yes        yes
//	xray      chacha20-poly1305   on, off         yes        yes
//	xray      none                (never pads)    yes        yes
//	xray      zero                (never pads)    yes        yes
//	sing-box  the same rows as xray
//
//	peer      security  packet_encoding  TCP 1 MiB  UDP (2 peers: XUDP over Mux.Cool)
//	xray      auto      xudp             yes        yes
//	xray      none      xudp             yes        yes
//	xray      zero      xudp             yes        yes
//	sing-box  the same rows as xray
//
// Every case also half-closes after an exchange: the flow must then end
// cleanly and promptly. The client ends its body with the end chunk and a
// FIN. Neither peer carries a half-close through to a destination that
// still has to answer (not checked, for that reason): Xray's server stops
// reading at the end chunk but leaves the destination open and ends the
// flow after its one-second downlink-only timeout; sing-box's ignores the
// end chunk, half-closes the destination on the FIN and then drops the
// flow's download.
//
// Every case runs against both peers; none is left out. A zero UDP link is
// framed in plain chunks (as sing-box's client frames it): both servers
// read those, where an unframed UDP body would lose datagram boundaries
// (sing-box refuses one outright).

const vmessUUID = "9d0f3b2c-4e1a-4c8b-a6f2-37d5e8c1b0a4"

func vmessPeerConfig(peer string, port int) string {
	if peer == "xray" {
		return fmt.Sprintf(`{"log":{"loglevel":"warning"},
"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":"vmess","settings":{"clients":[{"id":%q,"alterId":0}]}}],
"outbounds":[{"protocol":"freedom"}]}`, port, vmessUUID)
	}
	return fmt.Sprintf(`{"log":{"level":"warn"},
"inbounds":[{"type":"vmess","listen":"127.0.0.1","listen_port":%d,"users":[{"uuid":%q,"alterId":0}]}],
"outbounds":[{"type":"direct"}]}`, port, vmessUUID)
}

// vmessOutbound is switchyard's vmess outbound toward the peer on port.
func vmessOutbound(port int, security string, padding bool, packetEncoding string) string {
	return fmt.Sprintf(`
[[outbounds]]
tag = "vmess"
type = "vmess"
server = "127.0.0.1:%d"
uuid = %q
security = %q
global_padding = %v
packet_encoding = %q
`, port, vmessUUID, security, padding, packetEncoding)
}

func TestVMessInterop(t *testing.T) {
	cases := []struct {
		security string
		padding  bool
	}{
		{"auto", true},
		{"aes-128-gcm", true},
		{"aes-128-gcm", false},
		{"chacha20-poly1305", true},
		{"chacha20-poly1305", false},
		{"none", true},
		{"zero", true},
	}
	for _, peer := range []string{"xray", "sing-box"} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%s/%s/padding=%v", peer, tc.security, tc.padding), func(t *testing.T) {
				port := freePort(t)
				startPeer(t, peer, vmessPeerConfig(peer, port), port)
				proxy := startSwitchyard(t, vmessOutbound(port, tc.security, tc.padding, ""), "vmess")
				checkTCP(t, proxy)
				vmessCheckHalfClose(t, proxy)
				checkUDP(t, proxy, 1)
			})
		}
	}
}

// With packet_encoding "xudp" a UDP link is one Mux.Cool stream (the VMess
// Mux command) carrying XUDP, whose packets each name their own peer: one
// link reaches two peers. A clear ("none") Mux stream is read as a stream,
// and a "zero" one is unframed.
func TestVMessXUDPInterop(t *testing.T) {
	for _, peer := range []string{"xray", "sing-box"} {
		for _, security := range []string{"auto", "none", "zero"} {
			t.Run(peer+"/"+security, func(t *testing.T) {
				port := freePort(t)
				startPeer(t, peer, vmessPeerConfig(peer, port), port)
				proxy := startSwitchyard(t, vmessOutbound(port, security, true, "xudp"), "vmess")
				checkTCP(t, proxy)
				checkUDP(t, proxy, 2)
			})
		}
	}
}

// vmessCheckHalfClose exchanges 100 KiB with an echo server, then
// half-closes: the end of stream must reach the far side and end the flow
// cleanly and promptly, where a lost one would leave it open until an idle
// timeout.
func vmessCheckHalfClose(t *testing.T, proxy string) {
	t.Helper()
	c, err := socksclient.Dial(proxy, tcpEcho(t), "", "")
	if err != nil {
		t.Fatalf("CONNECT through switchyard: %v", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	payload := make([]byte, 100<<10)
	rand.Read(payload)
	if _, err := c.Write(payload); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("echo before the half-close: %v", err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	rest, err := io.ReadAll(c)
	if err != nil || len(rest) != 0 {
		t.Fatalf("after the half-close: %d bytes, %v", len(rest), err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the flow took %v to end after the half-close", d)
	}
}
