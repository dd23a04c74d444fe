package tun

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"switchyard/netx"
)

func readFrom(t *testing.T, c interface {
	ReadFrom([]byte) (int, net.Addr, error)
	SetReadDeadline(time.Time) error
}) (string, netip.AddrPort) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, from, err := c.ReadFrom(buf)
	if err != nil {
		t.Fatal(err)
	}
	ap := from.(*net.UDPAddr).AddrPort()
	return string(buf[:n]), netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Datagrams from one local endpoint to two peers are one association, each
// routed to its own destination; each reply comes back from its peer, and
// so does a reply from a third peer the application never sent to.
func TestUDPOneAssociationRepliesFromEveryPeer(t *testing.T) {
	third := netx.AddrFromAddrPort(netip.MustParseAddrPort("198.51.100.3:9"))
	conn := &fakeConnector{reply: func(p []byte, to netx.Addr) []netx.Addr {
		if string(p) == "both" {
			return []netx.Addr{to, third}
		}
		return []netx.Addr{to}
	}}
	l := newLab(t, Config{Sniff: true}, conn)
	u, err := l.app.ListenUDP(40000)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	peers := []netip.AddrPort{netip.MustParseAddrPort("198.51.100.1:7"), netip.MustParseAddrPort("198.51.100.2:7")}
	for _, p := range peers {
		if _, err := u.WriteTo([]byte("to "+p.String()), net.UDPAddrFromAddrPort(p)); err != nil {
			t.Fatal(err)
		}
		msg, from := readFrom(t, u)
		if msg != "to "+p.String() || from != p {
			t.Fatalf("reply %q from %s, want from %s", msg, from, p)
		}
	}
	u.WriteTo([]byte("both"), net.UDPAddrFromAddrPort(peers[0]))
	for _, want := range []netip.AddrPort{peers[0], netip.MustParseAddrPort("198.51.100.3:9")} {
		if msg, from := readFrom(t, u); msg != "both" || from != want {
			t.Fatalf("reply %q from %s, want from %s", msg, from, want)
		}
	}
	links := conn.Links()
	if len(links) != 1 {
		t.Fatalf("%d associations, want 1", len(links))
	}
	f := links[0].flow
	if f.Network != netx.UDP || f.Src != netip.AddrPortFrom(appV4, 40000) || !f.SniffPackets || f.Inbound != "tun-in" {
		t.Fatalf("association flow %+v", f)
	}
	sent := links[0].Sent()
	if len(sent) != 3 || sent[0].String() != peers[0].String() || sent[1].String() != peers[1].String() {
		t.Fatalf("packets sent to %v", sent)
	}
}

// A reply attributed to a name comes from the fake address the application
// sent to, and so does one from the real address behind it.
func TestUDPReplyFromANameComesFromTheFakeIP(t *testing.T) {
	fake := netip.MustParseAddrPort("198.18.0.5:443")
	var n int
	conn := &fakeConnector{reply: func(p []byte, to netx.Addr) []netx.Addr {
		n++
		if n == 1 {
			return []netx.Addr{{Name: "quic.example", Port: 443}}
		}
		return []netx.Addr{netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.44:443"))}
	}}
	isFake := func(a netip.Addr) bool { return netip.MustParsePrefix("198.18.0.0/15").Contains(a) }
	l := newLab(t, Config{IsFake: isFake}, conn)
	u, err := l.app.ListenUDP(40001)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	for range 2 {
		u.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(fake))
		if _, from := readFrom(t, u); from != fake {
			t.Fatalf("reply from %s, want %s", from, fake)
		}
	}
}

// Associations end when idle, and at most MaxAssociations exist: a new one
// evicts the least recently used.
func TestUDPAssociationsIdleAndBound(t *testing.T) {
	conn := &fakeConnector{}
	l := newLab(t, Config{MaxAssociations: 2, UDPIdle: 300 * time.Millisecond}, conn)
	dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort("198.51.100.1:7"))
	for port := uint16(41000); port < 41003; port++ {
		u, err := l.app.ListenUDP(port)
		if err != nil {
			t.Fatal(err)
		}
		defer u.Close()
		u.WriteTo([]byte("x"), dst)
		readFrom(t, u)
		time.Sleep(5 * time.Millisecond)
	}
	links := conn.Links()
	if len(links) != 3 || !links[0].closed() || links[1].closed() || links[2].closed() {
		t.Fatalf("after three endpoints at a bound of two: %d links", len(links))
	}
	if n := l.in.Associations(); n != 2 {
		t.Fatalf("%d associations at a bound of 2", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for l.in.Associations() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d associations still open after their idle timeout", l.in.Associations())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !links[1].closed() || !links[2].closed() {
		t.Fatal("an idle association's link is still open")
	}
}

// fakeDNS answers every query with its own bytes reversed, and counts.
type fakeDNS struct{ queries chan []byte }

func (d *fakeDNS) Answer(_ context.Context, msg []byte, _ netx.Network) ([]byte, error) {
	d.queries <- append([]byte(nil), msg...)
	out := make([]byte, len(msg))
	for i := range msg {
		out[len(msg)-1-i] = msg[i]
	}
	return out, nil
}

func (d *fakeDNS) Stream() net.Conn {
	a, b := net.Pipe()
	go func() {
		defer b.Close()
		buf := make([]byte, 512)
		n, err := b.Read(buf)
		if err != nil {
			return
		}
		d.queries <- append([]byte(nil), buf[:n]...)
		b.Write([]byte("tcp answer"))
	}()
	return a
}

// With dns_hijack, UDP and TCP to port 53 of any address are answered by
// the DNS service, from that address; nothing reaches the connector.
func TestDNSHijack(t *testing.T) {
	svc := &fakeDNS{queries: make(chan []byte, 4)}
	conn := &fakeConnector{target: echoServer(t)}
	l := newLab(t, Config{DNSHijack: true, DNS: func() DNS { return svc }}, conn)
	u, err := l.app.ListenUDP(40053)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	server := netip.MustParseAddrPort("203.0.113.53:53")
	u.WriteTo([]byte("abc"), net.UDPAddrFromAddrPort(server))
	if msg, from := readFrom(t, u); msg != "cba" || from != server {
		t.Fatalf("udp answer %q from %s", msg, from)
	}
	c, err := l.app.DialTCP(ctx5s(t), netip.MustParseAddrPort("[2001:db8::53]:53"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("q"))
	buf := make([]byte, 64)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := c.Read(buf)
	if string(buf[:n]) != "tcp answer" {
		t.Fatalf("tcp answer %q", buf[:n])
	}
	if len(svc.queries) != 2 || len(conn.Flows()) != 0 {
		t.Fatalf("%d queries at the service, %d flows at the connector", len(svc.queries), len(conn.Flows()))
	}
}

// Without dns_hijack, port 53 is a flow like any other.
func TestNoDNSHijackRoutesPort53(t *testing.T) {
	svc := &fakeDNS{queries: make(chan []byte, 4)}
	conn := &fakeConnector{}
	l := newLab(t, Config{DNS: func() DNS { return svc }}, conn)
	u, err := l.app.ListenUDP(40054)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	u.WriteTo([]byte("abc"), &net.UDPAddr{IP: net.IPv4(203, 0, 113, 53), Port: 53})
	if msg, _ := readFrom(t, u); msg != "abc" || len(svc.queries) != 0 {
		t.Fatalf("answer %q, %d queries at the service", msg, len(svc.queries))
	}
}

// Multicast and broadcast datagrams stay off the routes.
func TestUDPMulticastIsNotRouted(t *testing.T) {
	conn := &fakeConnector{}
	l := newLab(t, Config{}, conn)
	src := netip.AddrPortFrom(appV4, 5353)
	for _, dst := range []string{"224.0.0.251:5353", "255.255.255.255:67", "198.51.100.1:7"} {
		buf := make([]byte, packetOffset+udpHeaders+4)
		copy(buf[packetOffset+udpHeaders:], "ping")
		p, ok := buildUDP(buf, src, netip.MustParseAddrPort(dst), 4, 1500)
		if !ok {
			t.Fatal(dst)
		}
		l.dev.Outbound <- append([]byte(nil), p[packetOffset:]...)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(conn.Links()) == 0 || len(conn.Links()[0].Sent()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the unicast datagram was not routed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	if sent := conn.Links()[0].Sent(); len(sent) != 1 || sent[0].String() != "198.51.100.1:7" {
		t.Fatalf("routed %v", sent)
	}
}

// IPv6 datagrams get their replies from the IPv6 peer.
func TestUDPIPv6(t *testing.T) {
	conn := &fakeConnector{}
	l := newLab(t, Config{}, conn)
	u, err := l.app.ListenUDP(40600)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	peer := netip.MustParseAddrPort("[2001:db8::7]:7")
	u.WriteTo([]byte("six"), net.UDPAddrFromAddrPort(peer))
	if msg, from := readFrom(t, u); msg != "six" || from != peer {
		t.Fatalf("reply %q from %s", msg, from)
	}
	if f := conn.Links()[0].flow; f.Src != netip.AddrPortFrom(appV6, 40600) {
		t.Fatalf("association from %s", f.Src)
	}
}
