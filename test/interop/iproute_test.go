package interop

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"switchyard/test/socksclient"
)

// UDP through servers whose route rules select by destination IP: loopback
// (127.0.0.0/8) goes direct, everything else is rejected. Such a server
// routes a UDP link by the address its request header names, so the header
// must name a real peer, as Xray's and sing-box's own clients name it (the
// destination of the packet that opens the link); a 0.0.0.0:0 placeholder
// is rejected and the link gets no reply.
//
//	protocol  packet_encoding  what the request names            xray  sing-box
//	trojan    -                the first packet's peer            yes   yes
//	vless     -                the one target                     yes   yes
//	vless     xudp             nothing (Mux); New frame: the peer yes   yes
//	vmess     -                the one target                     yes   yes
//	vmess     xudp             nothing (Mux); New frame: the peer yes   yes
//
// Every case first checks that the rules are in force: a CONNECT to an echo
// server on ::1, loopback but outside 127.0.0.0/8, gets no echo.

// ipRouted turns a peer config whose only outbound is direct into one that
// routes 127.0.0.0/8 direct and rejects everything else.
func ipRouted(t *testing.T, peer, config string) string {
	t.Helper()
	var from, to string
	if peer == "xray" {
		from = `"outbounds":[{"protocol":"freedom"}]}`
		to = `"outbounds":[{"protocol":"freedom","tag":"direct"},{"protocol":"blackhole","tag":"block"}],` +
			`"routing":{"rules":[{"type":"field","ip":["127.0.0.0/8"],"outboundTag":"direct"},{"type":"field","network":"tcp,udp","outboundTag":"block"}]}}`
	} else {
		from = `"outbounds":[{"type":"direct"}]}`
		to = `"outbounds":[{"type":"direct","tag":"direct"}],` +
			`"route":{"rules":[{"ip_cidr":["127.0.0.0/8"],"outbound":"direct"},{"network":["tcp","udp"],"action":"reject"}],"final":"direct"}}`
	}
	if !strings.HasSuffix(config, from) {
		t.Fatalf("peer config does not end with %s:\n%s", from, config)
	}
	return strings.TrimSuffix(config, from) + to
}

func TestIPRoutedUDPInterop(t *testing.T) {
	cases := []struct {
		name     string
		udpPeers int
		peer     func(t *testing.T, peer string, port int) (config, cert string)
		out      func(port int, cert string) string
	}{
		{"trojan", 2, func(t *testing.T, peer string, port int) (string, string) {
			cert, key := tlsFiles(t)
			return peerConfig(peer, "trojan", port, cert, key), cert
		}, func(port int, cert string) string {
			return fmt.Sprintf("type = \"trojan\"\nserver = \"127.0.0.1:%d\"\npassword = %q\n%s\n", port, interopPassword, clientTLS(cert))
		}},
		{"vless", 1, vlessPlainPeer, vlessOut("")},
		{"vless/xudp", 2, vlessPlainPeer, vlessOut("xudp")},
		{"vmess", 1, vmessPeer, vmessOut("")},
		{"vmess/xudp", 2, vmessPeer, vmessOut("xudp")},
	}
	for _, peer := range bothPeers {
		for _, tc := range cases {
			t.Run(peer+"/"+tc.name, func(t *testing.T) {
				port := freePort(t)
				config, cert := tc.peer(t, peer, port)
				startPeer(t, peer, ipRouted(t, peer, config), port)
				proxy := startSwitchyard(t, "[[outbounds]]\ntag = \"proxy\"\n"+tc.out(port, cert), "proxy")
				checkRejected(t, proxy)
				t.Run("tcp", func(t *testing.T) { checkTCP(t, proxy) })
				t.Run("udp", func(t *testing.T) { checkUDP(t, proxy, tc.udpPeers) })
			})
		}
	}
}

func vlessPlainPeer(t *testing.T, peer string, port int) (string, string) {
	return peerConfig(peer, "vless", port, "", ""), ""
}

func vlessOut(encoding string) func(int, string) string {
	return func(port int, _ string) string {
		return fmt.Sprintf("type = \"vless\"\nserver = \"127.0.0.1:%d\"\nuuid = %q\npacket_encoding = %q\n", port, interopUUID, encoding)
	}
}

func vmessPeer(t *testing.T, peer string, port int) (string, string) {
	return vmessPeerConfig(peer, port), ""
}

func vmessOut(encoding string) func(int, string) string {
	return func(port int, _ string) string {
		return fmt.Sprintf("type = \"vmess\"\nserver = \"127.0.0.1:%d\"\nuuid = %q\nsecurity = \"aes-128-gcm\"\npacket_encoding = %q\n", port, vmessUUID, encoding)
	}
}

// checkRejected opens a flow to an echo server on ::1, which the server's
// rules reject, and requires the server to end it without an echo.
func checkRejected(t *testing.T, proxy string) {
	t.Helper()
	ln, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	c, err := socksclient.Dial(proxy, ln.Addr().String(), "", "")
	if err != nil {
		return // refused at the dial: rejected
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("hello"))
	n, err := io.Copy(io.Discard, c)
	if errors.Is(err, os.ErrDeadlineExceeded) || n > 0 {
		t.Fatalf("a flow to %s was not rejected by the server's rules (%d bytes, %v)", ln.Addr(), n, err)
	}
}
