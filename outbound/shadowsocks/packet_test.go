package shadowsocks

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
	"switchyard/spec"
)

// Each packet names its own destination; each reply is attributed to the
// address the server names.
func TestPacketLinkPerPacketAddress(t *testing.T) {
	for _, method := range []string{"aes-128-gcm", "aes-256-gcm", "chacha20-ietf-poly1305"} {
		srv := udpEchoServer(t, method, "pw")
		o := build(t, srv.LocalAddr().String(), method, "pw")
		l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range []netx.Addr{
			{IP: netip.MustParseAddr("192.0.2.1"), Port: 53},
			netx.DomainAddr("example.org", 5353),
			{IP: netip.MustParseAddr("2001:db8::2"), Port: 9},
		} {
			if err := l.WritePacket([]byte("ping "+to.String()), to); err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 2048)
			n, from, err := l.ReadPacket(p)
			if err != nil {
				t.Fatal(err)
			}
			if from != to || string(p[:n]) != "re:ping "+to.String() {
				t.Fatalf("%s: reply %q from %v, want from %v", method, p[:n], from, to)
			}
		}
		l.Close()
	}
}

// Datagrams from elsewhere, and datagrams from the server that do not open,
// are dropped; the link goes on.
func TestPacketLinkDropsBadDatagrams(t *testing.T) {
	srv := udpEchoServer(t, "aes-128-gcm", "pw")
	o := build(t, srv.LocalAddr().String(), "aes-128-gcm", "pw")
	pl, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	l := pl.(*packetLink)
	local := l.sock.LocalAddr().(*net.UDPAddr).AddrPort()
	local = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), local.Port())

	stranger, _ := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	defer stranger.Close()
	stranger.WriteToUDPAddrPort(make([]byte, 100), local)
	srv.WriteToUDPAddrPort([]byte("not a shadowsocks packet at all, not at all"), local)
	to := netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 7}
	time.Sleep(50 * time.Millisecond)
	if err := l.WritePacket([]byte("x"), to); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 100)
	n, from, err := l.ReadPacket(p)
	if err != nil || from != to || string(p[:n]) != "re:x" {
		t.Fatalf("after bad datagrams: %q from %v, %v", p[:n], from, err)
	}
}

func TestPacketLinkTooLarge(t *testing.T) {
	o := build(t, "127.0.0.1:9", "2022-blake3-aes-128-gcm", "AAAAAAAAAAAAAAAAAAAAAA==")
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = l.WritePacket(make([]byte, 65500), netx.DomainAddr("example.com", 53))
	if err == nil || err.Error() != "shadowsocks udp: frame larger than the client runtime's buffer" {
		t.Fatalf("%v", err)
	}
}

// Close ends a pending ReadPacket; a second Close is harmless.
func TestPacketLinkClose(t *testing.T) {
	o := build(t, "127.0.0.1:9", "aes-128-gcm", "pw")
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 10))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("ReadPacket after Close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end ReadPacket")
	}
	l.Close()
}

func TestDialPacketUnresolvable(t *testing.T) {
	o := build(t, "server.invalid:8388", "aes-128-gcm", "pw")
	if _, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP}); err == nil {
		t.Fatal("a link to an unresolvable server")
	}
}

// Over a transport other than tcp, a UDP flow is refused with ErrNoUDP
// before anything is resolved or bound: no datagram goes to the server's
// address past the transport.
func TestDialPacketRefusesOverAStreamTransport(t *testing.T) {
	relay, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	for _, tr := range []spec.Transport{
		{Type: "ws", Path: "/ss"},
		{Type: "httpupgrade", Path: "/ss"},
		{Type: "grpc", ServiceName: "ss"},
	} {
		t.Run(tr.Type, func(t *testing.T) {
			var sockets atomic.Int32
			d := deps()
			d.Dialer = netx.NewDialer(netx.SocketPolicy{Hook: func(netx.SocketInfo) error { sockets.Add(1); return nil }}, 0)
			o, err := New(spec.Outbound{Tag: "ss", Type: "shadowsocks", Server: relay.LocalAddr().String(), Method: "aes-128-gcm", Password: "pw",
				UDP: true, Transport: tr, TLS: &spec.TLS{ServerName: "ss.test"}}, d)
			if err != nil {
				t.Fatal(err)
			}
			l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
			if err == nil {
				l.WritePacket([]byte("ping"), netx.DomainAddr("example.org", 53))
				l.Close()
				t.Fatal("a datagram link over a stream transport")
			}
			want := "shadowsocks[ss] over a " + tr.Type + " transport carries no datagrams"
			if !errors.Is(err, outbound.ErrNoUDP) || err.Error() != want {
				t.Fatalf("DialPacket: %v, want %q matching ErrNoUDP", err, want)
			}
			if n := sockets.Load(); n != 0 {
				t.Fatalf("%d sockets opened", n)
			}
			if o.CarriesUDP() {
				t.Fatal("an outbound whose DialPacket refuses reports CarriesUDP true")
			}
		})
	}
	relay.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, _, err := relay.ReadFromUDP(make([]byte, 2048)); err == nil {
		t.Fatalf("the server's UDP address got a %d-byte datagram", n)
	}
}

// With the plain tcp transport (written or left out) UDP goes to the
// server's relay as before.
func TestDialPacketOverTCP(t *testing.T) {
	srv := udpEchoServer(t, "aes-128-gcm", "pw")
	o, err := New(spec.Outbound{Tag: "ss", Type: "shadowsocks", Server: srv.LocalAddr().String(), Method: "aes-128-gcm", Password: "pw",
		UDP: true, Transport: spec.Transport{Type: "tcp"}}, deps())
	if err != nil {
		t.Fatal(err)
	}
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if !o.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
}
