package socks

import (
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/protocol/socks5"
	"switchyard/spec"
)

func listenUDP(t *testing.T, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 0)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// quiet asserts that c receives nothing for a while.
func quiet(t *testing.T, c *net.UDPConn, who string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, err := c.Read(make([]byte, 2048)); err == nil {
		t.Fatalf("the %s received a %d-byte datagram", who, n)
	}
}

// An association belongs to the client that asked for it. A local socket
// that never authenticated, sending to the relay before the client does,
// neither takes the association nor receives a reply: when the request
// named the client's address and port (RFC 1928), datagrams from anything
// else are dropped; when it named port zero, the first datagram from the
// control connection's IP takes it, so a socket on another IP cannot.
func TestUDPAssociationBelongsToItsClient(t *testing.T) {
	users := []spec.User{{Username: "alice", Password: "secret"}}
	for _, tt := range []struct {
		name string
		// declare is what the request names, given the client's socket.
		declare    func(client netip.AddrPort) netx.Addr
		attackerIP string
	}{
		{"address and port", func(c netip.AddrPort) netx.Addr { return netx.AddrFromAddrPort(c) }, "127.0.0.1"},
		{"unspecified address, port", func(c netip.AddrPort) netx.Addr {
			return netx.AddrFromAddrPort(netip.AddrPortFrom(netip.IPv4Unspecified(), c.Port()))
		}, "127.0.0.1"},
		{"port zero", func(netip.AddrPort) netx.Addr { return netx.Addr{} }, "127.0.0.2"},
	} {
		for _, auth := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/auth=%v", tt.name, auth), func(t *testing.T) {
				peer := inboundtest.UDPEcho(t)
				to := netx.AddrFromAddrPort(peer.LocalAddr().(*net.UDPAddr).AddrPort())
				cfg := Config{UDP: true}
				user, pass := "", ""
				if auth {
					cfg.Users, user, pass = users, "alice", "secret"
				}
				conn, proxy := start(t, cfg)
				client := listenUDP(t, "127.0.0.1")
				ctrl := dial(t, proxy, user, pass)
				code, bound := request(t, ctrl, socks5.CmdUDPAssociate, tt.declare(client.LocalAddr().(*net.UDPAddr).AddrPort()))
				if code != socks5.ReplySucceeded {
					t.Fatalf("reply %#x", code)
				}
				relay, _ := bound.AddrPort()

				attacker := listenUDP(t, tt.attackerIP)
				if _, err := attacker.WriteToUDPAddrPort(socks5.AppendUDP(nil, to, []byte("attacker")), relay); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
				if _, err := client.WriteToUDPAddrPort(socks5.AppendUDP(nil, to, []byte("owner")), relay); err != nil {
					t.Fatal(err)
				}
				if from, p := readDatagram(t, client); string(p) != "owner" || from != to {
					t.Fatalf("the client got %q from %v", p, from)
				}
				if _, err := attacker.WriteToUDPAddrPort(socks5.AppendUDP(nil, to, []byte("attacker again")), relay); err != nil {
					t.Fatal(err)
				}
				quiet(t, attacker, "attacker")
				quiet(t, client, "client")
				if n := conn.Links()[0].Writes(); n != 1 {
					t.Fatalf("%d datagrams reached the link, want the client's one", n)
				}
			})
		}
	}
}

func TestOwnerOf(t *testing.T) {
	ctrl := netip.MustParseAddr("192.0.2.7")
	for _, tt := range []struct {
		declared    netx.Addr
		want, other string // want "": the association locks to its first datagram
	}{
		{netx.Addr{}, "", ""},
		{netx.Addr{IP: netip.IPv4Unspecified()}, "", ""},
		{netx.Addr{IP: netip.MustParseAddr("192.0.2.9")}, "", ""},
		{netx.Addr{IP: netip.IPv4Unspecified(), Port: 4000}, "192.0.2.7:4000", ""},
		{netx.Addr{IP: netip.IPv6Unspecified(), Port: 4000}, "192.0.2.7:4000", ""},
		{netx.Addr{IP: ctrl, Port: 4000}, "192.0.2.7:4000", ""},
		{netx.Addr{IP: netip.MustParseAddr("::ffff:192.0.2.7"), Port: 4000}, "192.0.2.7:4000", ""},
		// Another IP or a name: what sing-box and mihomo send (their
		// first destination), not where the client sends from.
		{netx.Addr{IP: netip.MustParseAddr("192.0.2.9"), Port: 4000}, "", "192.0.2.9:4000"},
		{netx.Addr{IP: netip.MustParseAddr("::ffff:192.0.2.9"), Port: 4000}, "", "192.0.2.9:4000"},
		{netx.DomainAddr("client.example", 4000), "", ""},
	} {
		got, ok, other := ownerOf(tt.declared, ctrl)
		if s := got.String(); (ok && s != tt.want) || (!ok && tt.want != "") {
			t.Errorf("ownerOf(%v) = %v, %v; want %q", tt.declared, got, ok, tt.want)
		}
		if o := other.String(); (tt.other == "" && other.IsValid()) || (tt.other != "" && o != tt.other) {
			t.Errorf("ownerOf(%v) other = %v; want %q", tt.declared, other, tt.other)
		}
	}
}

// A client that names its first destination in the request, as sing-box's
// and mihomo's SOCKS5 outbounds do, rather than its own address, is served:
// its association locks to its first datagram from the control
// connection's IP.
func TestAClientNamingItsDestinationIsServed(t *testing.T) {
	peer := inboundtest.UDPEcho(t)
	to := netx.AddrFromAddrPort(peer.LocalAddr().(*net.UDPAddr).AddrPort())
	for _, declared := range []netx.Addr{
		netx.AddrFromAddrPort(netip.MustParseAddrPort("198.51.100.1:53")),
		netx.DomainAddr("dns.example", 53),
	} {
		t.Run(declared.String(), func(t *testing.T) {
			_, proxy := start(t, Config{UDP: true})
			client := listenUDP(t, "127.0.0.1")
			ctrl := dial(t, proxy, "", "")
			code, bound := request(t, ctrl, socks5.CmdUDPAssociate, declared)
			if code != socks5.ReplySucceeded {
				t.Fatalf("reply %#x", code)
			}
			relay, _ := bound.AddrPort()
			if _, err := client.WriteToUDPAddrPort(socks5.AppendUDP(nil, to, []byte("hello")), relay); err != nil {
				t.Fatal(err)
			}
			if from, p := readDatagram(t, client); string(p) != "hello" || from != to {
				t.Fatalf("the client got %q from %v", p, from)
			}
		})
	}
}
