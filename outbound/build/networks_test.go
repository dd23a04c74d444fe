package build

import (
	"context"
	"errors"
	"io"
	"net/netip"
	"sync/atomic"
	"testing"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// Every protocol states from its configuration alone whether it carries
// UDP, and udp = false turns it off for all of them.
func TestCarriesUDPPerProtocol(t *testing.T) {
	const (
		uuid = "b831381d-6324-4d53-ad4f-8cda48b30811"
		key  = "YNXtAzepDqRv9H52osJVDQnznT5AL11eVMG+Ox4TYSg=" // any 32 bytes
	)
	for _, tc := range []struct {
		o    spec.Outbound
		want bool
	}{
		{spec.Outbound{Type: "direct"}, true},
		{spec.Outbound{Type: "block"}, true},
		{spec.Outbound{Type: "socks", Server: "127.0.0.1:1080"}, true},
		{spec.Outbound{Type: "http", Server: "127.0.0.1:3128"}, false},
		{spec.Outbound{Type: "shadowsocks", Server: "127.0.0.1:8388", Method: "aes-128-gcm", Password: "pw"}, true},
		{spec.Outbound{Type: "shadowsocks", Server: "127.0.0.1:8388", Method: "aes-128-gcm", Password: "pw", Transport: spec.Transport{Type: "tcp"}}, true},
		{spec.Outbound{Type: "shadowsocks", Server: "127.0.0.1:8388", Method: "aes-128-gcm", Password: "pw", Transport: spec.Transport{Type: "ws", Path: "/"}}, false},
		{spec.Outbound{Type: "trojan", Server: "127.0.0.1:443", Password: "pw", TLS: &spec.TLS{ServerName: "t.test"}}, true},
		{spec.Outbound{Type: "vless", Server: "127.0.0.1:443", UUID: uuid}, true},
		{spec.Outbound{Type: "vless", Server: "127.0.0.1:443", UUID: uuid, PacketEncoding: "xudp"}, true},
		{spec.Outbound{Type: "vmess", Server: "127.0.0.1:443", UUID: uuid, Security: "aes-128-gcm"}, true},
		{spec.Outbound{Type: "vmess", Server: "127.0.0.1:443", UUID: uuid, Security: "aes-128-gcm", PacketEncoding: "xudp"}, true},
		{spec.Outbound{Type: "hysteria2", Server: "127.0.0.1:443", Password: "pw"}, true},
		{spec.Outbound{Type: "wireguard", Endpoint: "127.0.0.1:51820", PrivateKey: key, PeerPublicKey: key,
			Addresses: []netip.Prefix{netip.MustParsePrefix("10.7.0.2/32")}}, true},
	} {
		for _, udp := range []bool{true, false} {
			o := tc.o
			o.Tag, o.UDP, o.AddressFamily = "x", udp, "auto"
			name := o.Type + "/" + o.Transport.Type + "/" + o.PacketEncoding
			if !udp {
				name += "/udp=false"
			}
			t.Run(name, func(t *testing.T) {
				var sockets atomic.Int32
				d := deps()
				d.Dialer = netx.NewDialer(netx.SocketPolicy{Hook: func(netx.SocketInfo) error { sockets.Add(1); return nil }}, 0)
				out, err := Outbound(o, d)
				if err != nil {
					t.Fatal(err)
				}
				if c, ok := out.(io.Closer); ok {
					defer c.Close()
				}
				want := tc.want && udp
				if got := outbound.CarriesUDP(out); got != want {
					t.Fatalf("CarriesUDP = %v, want %v", got, want)
				}
				if want {
					return // the protocol's own tests open links
				}
				ctx, cancel := context.WithCancel(context.Background())
				cancel() // a dial would fail, not hang, should one begin
				l, err := out.DialPacket(ctx, netx.Flow{Network: netx.UDP, Dst: netx.DomainAddr("example.org", 53)})
				if err == nil {
					l.Close()
				}
				if !errors.Is(err, outbound.ErrNoUDP) {
					t.Fatalf("DialPacket: %v, want an error matching ErrNoUDP", err)
				}
				if n := sockets.Load(); n != 0 {
					t.Fatalf("the refusal opened %d sockets", n)
				}
			})
		}
	}
}

// An outbound that states nothing is asked at admission: CarriesUDP takes
// it to carry datagrams.
func TestCarriesUDPOfAnOutboundStatingNothing(t *testing.T) {
	var o struct{ outbound.Outbound }
	if !outbound.CarriesUDP(o) {
		t.Fatal("an outbound without Networks reported no UDP")
	}
}
