package interop

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"

	"golang.zx2c4.com/wireguard/conn"
	"golang.zx2c4.com/wireguard/device"
	"golang.zx2c4.com/wireguard/tun/netstack"
)

// The WireGuard client against Xray's wireguard inbound and a WireGuard
// peer on a userspace network stack run by the test.
//
//	peer      options                                TCP 1 MiB  UDP on one association
//	xray      -                                      yes        yes, 1 peer
//	xray      preshared_key, reserved, keepalive     yes        yes, 1 peer
//	netstack  -                                      yes        yes, 2 peers
//
// The client sends each datagram of a link to its own address inside the
// tunnel, from one local port. Xray's inbound keys its UDP sessions by the
// source address alone (proxy/wireguard/tun.go, udpManager.feed) and
// dispatches a session to the destination of its first datagram, so from
// one source port it delivers every datagram to the first peer: against
// Xray the UDP check uses one peer, and two peers on one association are
// checked against the netstack peer, which honours each datagram's address.
//
// Xray's inbound forwards what comes out of the tunnel to its freedom
// outbound. Its userspace stack drops packets to a loopback destination
// ("Martian packet dropped with loopback destination address"), so the echo
// servers for the Xray cases listen on the machine's first non-loopback
// IPv4 address instead of 127.0.0.1. The netstack peer serves its echoes
// inside the tunnel, at 10.7.0.1.
//
// Not run: sing-box. The pinned sing-box is built without with_wireguard,
// so it has no WireGuard endpoint to serve.

type wgKeys struct{ private, public string }

func newWGKeys(t *testing.T) wgKeys {
	t.Helper()
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return wgKeys{
		private: base64.StdEncoding.EncodeToString(k.Bytes()),
		public:  base64.StdEncoding.EncodeToString(k.PublicKey().Bytes()),
	}
}

// wgOutbound is the switchyard side: a wireguard outbound tagged "wg".
func wgOutbound(port int, client wgKeys, peerPublic, extra string) string {
	return fmt.Sprintf(`
[[outbounds]]
tag = "wg"
type = "wireguard"
endpoint = "127.0.0.1:%d"
private_key = %q
peer_public_key = %q
addresses = ["10.7.0.2/32"]
mtu = 1408
%s
`, port, client.private, peerPublic, extra)
}

func TestWireGuardAgainstXray(t *testing.T) {
	cases := []struct {
		name       string
		peerExtra  string // in Xray's peer object
		clientTOML func(psk string) string
	}{
		{"plain", "", func(string) string { return "" }},
		{"psk reserved keepalive", `"preSharedKey":%q,`, func(psk string) string {
			return fmt.Sprintf("preshared_key = %q\nreserved = [1, 2, 3]\nkeepalive = \"25s\"", psk)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			server, client := newWGKeys(t), newWGKeys(t)
			psk := newWGKeys(t).private // any 32 random bytes
			peerExtra := tc.peerExtra
			if peerExtra != "" {
				peerExtra = fmt.Sprintf(peerExtra, psk)
			}
			port := freePort(t)
			startPeer(t, "xray", fmt.Sprintf(`{"log":{"loglevel":"warning"},
"inbounds":[{"listen":"127.0.0.1","port":%d,"protocol":"wireguard","settings":{
  "secretKey":%q,"address":["10.7.0.1/32"],"mtu":1408,
  "peers":[{%s"publicKey":%q,"allowedIPs":["10.7.0.2/32"]}]}}],
"outbounds":[{"protocol":"freedom"}]}`, port, server.private, peerExtra, client.public), 0)
			proxy := startSwitchyard(t, wgOutbound(port, client, server.public, tc.clientTOML(psk)), "wg")
			host := hostAddr(t)
			checkTCPTo(t, proxy, tcpEchoAt(t, host))
			checkUDPTo(t, proxy, []string{udpEchoAt(t, host, "p0:")})
		})
	}
}

func TestWireGuardAgainstNetstackPeer(t *testing.T) {
	server, client := newWGKeys(t), newWGKeys(t)
	port := freePort(t)
	startNetstackPeer(t, server, client.public, port)
	proxy := startSwitchyard(t, wgOutbound(port, client, server.public, ""), "wg")
	checkTCPTo(t, proxy, "10.7.0.1:7")
	checkUDPTo(t, proxy, []string{"10.7.0.1:9001", "10.7.0.1:9002"})
}

// hostAddr is the machine's first non-loopback IPv4 address that is up.
func hostAddr(t *testing.T) netip.Addr {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && p.Addr().IsGlobalUnicast() {
				return p.Addr()
			}
		}
	}
	t.Fatal("no non-loopback IPv4 address: Xray's WireGuard inbound cannot reach a loopback echo server")
	return netip.Addr{}
}

// tcpEchoAt is a TCP echo server on ip.
func tcpEchoAt(t *testing.T, ip netip.Addr) string {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
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
	return ln.Addr().String()
}

// udpEchoAt answers every datagram with prefix+payload, from ip.
func udpEchoAt(t *testing.T, ip netip.Addr, prefix string) string {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() {
		b := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			c.WriteToUDPAddrPort(append([]byte(prefix), b[:n]...), from)
		}
	}()
	return c.LocalAddr().String()
}

// startNetstackPeer runs a WireGuard peer on a userspace stack listening on
// 127.0.0.1:port, with a TCP echo on 10.7.0.1:7 and UDP echoes on
// 10.7.0.1:9001 and :9002 inside its tunnel; UDP replies carry "p<i>:".
func startNetstackPeer(t *testing.T, server wgKeys, clientPublic string, port int) {
	t.Helper()
	tdev, tnet, err := netstack.CreateNetTUN([]netip.Addr{netip.MustParseAddr("10.7.0.1")}, nil, 1408)
	if err != nil {
		t.Fatal(err)
	}
	dev := device.NewDevice(tdev, conn.NewDefaultBind(), device.NewLogger(device.LogLevelSilent, ""))
	hexKey := func(b64 string) string {
		b, _ := base64.StdEncoding.DecodeString(b64)
		return hex.EncodeToString(b)
	}
	if err := dev.IpcSet(fmt.Sprintf("private_key=%s\nlisten_port=%d\npublic_key=%s\nallowed_ip=10.7.0.2/32\n",
		hexKey(server.private), port, hexKey(clientPublic))); err != nil {
		t.Fatal(err)
	}
	if err := dev.Up(); err != nil {
		t.Fatal(err)
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		closers []io.Closer
	)
	track := func(c io.Closer) { mu.Lock(); closers = append(closers, c); mu.Unlock() }
	ln, err := tnet.ListenTCPAddrPort(netip.MustParseAddrPort("10.7.0.1:7"))
	if err != nil {
		t.Fatal(err)
	}
	track(ln)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			track(c)
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(c, c); c.Close() }()
		}
	}()
	for i, p := range []string{"10.7.0.1:9001", "10.7.0.1:9002"} {
		c, err := tnet.ListenUDPAddrPort(netip.MustParseAddrPort(p))
		if err != nil {
			t.Fatal(err)
		}
		track(c)
		prefix := fmt.Sprintf("p%d:", i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := make([]byte, 65535)
			for {
				n, from, err := c.ReadFrom(b)
				if err != nil {
					return
				}
				c.WriteTo(append([]byte(prefix), b[:n]...), from)
			}
		}()
	}
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range closers {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		dev.Close()
	})
}
