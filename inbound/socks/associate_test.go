package socks

import (
	"bytes"
	"net"
	"net/netip"
	"testing"
	"time"

	"switchyard/inbound/internal/inboundtest"
	"switchyard/netx"
	"switchyard/protocol/socks5"
)

// associateClient opens an association and a UDP socket to talk through it.
func associateClient(t *testing.T, proxy string) (ctrl net.Conn, relay netip.AddrPort, udp *net.UDPConn) {
	t.Helper()
	ctrl = dial(t, proxy, "", "")
	code, bound := request(t, ctrl, socks5.CmdUDPAssociate, netx.Addr{})
	if code != socks5.ReplySucceeded {
		t.Fatalf("reply %#x", code)
	}
	relay, ok := bound.AddrPort()
	if !ok || relay.Addr() != netip.MustParseAddr("127.0.0.1") || relay.Port() == 0 {
		t.Fatalf("relay address %v is not on the control connection's local IP", bound)
	}
	udp, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	return ctrl, relay, udp
}

func readDatagram(t *testing.T, udp *net.UDPConn) (netx.Addr, []byte) {
	t.Helper()
	udp.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 2048)
	n, err := udp.Read(buf)
	if err != nil {
		t.Fatalf("no reply: %v", err)
	}
	from, payload, err := socks5.ParseUDP(buf[:n])
	if err != nil {
		t.Fatal(err)
	}
	return from, payload
}

func TestUDPAssociate(t *testing.T) {
	peer1, peer2 := inboundtest.UDPEcho(t), inboundtest.UDPEcho(t)
	conn, proxy := start(t, Config{Tag: "u", UDP: true})
	ctrl, relay, udp := associateClient(t, proxy)

	for i, peer := range []*net.UDPConn{peer1, peer2, peer1} {
		to := netx.AddrFromAddrPort(peer.LocalAddr().(*net.UDPAddr).AddrPort())
		msg := []byte{'m', byte('0' + i)}
		if _, err := udp.WriteToUDPAddrPort(socks5.AppendUDP(nil, to, msg), relay); err != nil {
			t.Fatal(err)
		}
		from, payload := readDatagram(t, udp)
		if from != to || !bytes.Equal(payload, msg) {
			t.Fatalf("datagram %d: from %v %q; want from %v %q", i, from, payload, to, msg)
		}
	}

	links := conn.Links()
	if len(links) != 1 {
		t.Fatalf("%d associations opened", len(links))
	}
	want := netx.Flow{Network: netx.UDP, Src: netip.MustParseAddrPort(ctrl.LocalAddr().String()), Inbound: "u"}
	if links[0].Flow != want {
		t.Fatalf("association flow %+v, want %+v", links[0].Flow, want)
	}
}

// Once the client's first datagram fixed its port, datagrams from another
// port are dropped, and so are malformed and fragmented ones.
func TestUDPAssociateDrops(t *testing.T) {
	peer := inboundtest.UDPEcho(t)
	to := netx.AddrFromAddrPort(peer.LocalAddr().(*net.UDPAddr).AddrPort())
	conn, proxy := start(t, Config{UDP: true})
	_, relay, udp := associateClient(t, proxy)

	send := func(c *net.UDPConn, b []byte) {
		t.Helper()
		if _, err := c.WriteToUDPAddrPort(b, relay); err != nil {
			t.Fatal(err)
		}
	}
	// A datagram from another IP, before the client's first one, neither
	// passes nor takes the client's place.
	stranger, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	send(stranger, socks5.AppendUDP(nil, to, []byte("stranger")))
	time.Sleep(20 * time.Millisecond)

	send(udp, socks5.AppendUDP(nil, to, []byte("first")))
	if _, p := readDatagram(t, udp); string(p) != "first" {
		t.Fatalf("got %q", p)
	}

	other, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	send(other, socks5.AppendUDP(nil, to, []byte("intruder")))
	frag := socks5.AppendUDP(nil, to, []byte("fragment"))
	frag[2] = 1
	send(udp, frag)
	send(udp, []byte{0, 0})
	send(udp, socks5.AppendUDP(nil, to, []byte("last")))

	if _, p := readDatagram(t, udp); string(p) != "last" {
		t.Fatalf("got %q, want the dropped datagrams skipped", p)
	}
	if n := conn.Links()[0].Writes(); n != 2 {
		t.Fatalf("%d datagrams reached the link, want 2", n)
	}
	for _, c := range []*net.UDPConn{other, stranger} {
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, err := c.Read(make([]byte, 64)); err == nil {
			t.Fatalf("%v got a %d-byte reply", c.LocalAddr(), n)
		}
	}
}

// Closing the control connection ends the association: the link is closed
// and the relay socket stops answering.
func TestUDPAssociationEndsWithControl(t *testing.T) {
	peer := inboundtest.UDPEcho(t)
	to := netx.AddrFromAddrPort(peer.LocalAddr().(*net.UDPAddr).AddrPort())
	conn, proxy := start(t, Config{UDP: true})
	ctrl, relay, udp := associateClient(t, proxy)
	if _, err := udp.WriteToUDPAddrPort(socks5.AppendUDP(nil, to, []byte("x")), relay); err != nil {
		t.Fatal(err)
	}
	readDatagram(t, udp)

	ctrl.Close()
	select {
	case <-conn.Links()[0].Closed():
	case <-time.After(5 * time.Second):
		t.Fatal("the link was not closed after the control connection closed")
	}
}

// Server.Close ends live relays and associations and returns only once
// their goroutines are done (goleak checks the rest).
func TestCloseEndsFlows(t *testing.T) {
	echo, _ := inboundtest.TCPEcho(t, "127.0.0.1:0")
	conn := inboundtest.NewConnector(t)
	srv := New(Config{UDP: true}, conn, inboundtest.Logger(t))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	proxy := ln.Addr().String()

	tcp := dial(t, proxy, "", "")
	if code, _ := request(t, tcp, socks5.CmdConnect, netx.AddrFromAddrPort(netip.MustParseAddrPort(echo.Addr().String()))); code != 0 {
		t.Fatalf("reply %#x", code)
	}
	echoes(t, tcp, []byte("live"))
	ctrl, _, _ := associateClient(t, proxy)
	idle, err := net.Dial("tcp", proxy) // mid-handshake
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()

	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v after Close", err)
	}
	select {
	case <-conn.Links()[0].Closed():
	default:
		t.Fatal("Close returned with the association's link open")
	}
	for _, c := range []net.Conn{tcp, ctrl, idle} {
		closedByPeer(t, c)
	}
	if _, err := net.Dial("tcp", proxy); err == nil {
		t.Fatal("the listener still accepts after Close")
	}
}

// A datagram's round trip through an association allocates nothing in the
// inbound once the association is up.
func TestUDPAssociationAllocations(t *testing.T) {
	if testing.Short() {
		t.Skip("measures allocations over many round trips")
	}
	if raceEnabled {
		t.Skip("sync.Pool drops buffers at random under the race detector")
	}
	peer := inboundtest.UDPEcho(t)
	to := netx.AddrFromAddrPort(peer.LocalAddr().(*net.UDPAddr).AddrPort())
	_, proxy := start(t, Config{UDP: true})
	_, relay, udp := associateClient(t, proxy)
	pkt := socks5.AppendUDP(nil, to, make([]byte, 512))
	buf := make([]byte, 2048)
	udp.SetReadDeadline(time.Now().Add(30 * time.Second))
	roundTrip := func() {
		if _, err := udp.WriteToUDPAddrPort(pkt, relay); err != nil {
			t.Fatal(err)
		}
		if _, _, err := udp.ReadFromUDPAddrPort(buf); err != nil {
			t.Fatal(err)
		}
	}
	roundTrip() // the client's port is learned, the buffers are taken
	if n := testing.AllocsPerRun(200, roundTrip); n > 0.1 {
		t.Fatalf("%.2f allocations per datagram round trip", n)
	}
}
