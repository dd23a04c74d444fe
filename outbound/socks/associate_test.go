package socks

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
	"switchyard/outbound/internal/proxytest"
	"switchyard/protocol/socks5"
)

// relayServer is a SOCKS5 server whose associations relay through one UDP
// socket: every datagram is answered with "echo:" and its payload, under a
// header naming the peer it was addressed to.
type relayServer struct {
	server
	udp     *net.UDPConn
	control chan net.Conn // each association's control connection
}

func startRelay(t *testing.T, network, user, pass string, bound func(relay netip.AddrPort) netx.Addr) (*relayServer, string) {
	t.Helper()
	ip := "127.0.0.1"
	if network == "udp6" {
		ip = "::1"
	}
	udp, err := net.ListenUDP(network, &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Skipf("no %s loopback: %v", network, err)
	}
	relay := udp.LocalAddr().(*net.UDPAddr).AddrPort()
	r := &relayServer{udp: udp, control: make(chan net.Conn, 4)}
	r.user, r.pass = user, pass
	r.bound = netx.AddrFromAddrPort(relay)
	if bound != nil {
		r.bound = bound(relay)
	}
	r.requests = make(chan socks5.Request, 4)
	r.after = func(c net.Conn, _ socks5.Request) {
		r.control <- c
		var b [64]byte
		for {
			if _, err := c.Read(b[:]); err != nil {
				return
			}
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Allocation-free, so that the client's allocations can be counted.
		var parser socks5.UDPParser
		b := make([]byte, 70000)
		echo := make([]byte, 0, len(b))
		out := make([]byte, 0, len(b)+socks5.MaxUDPHeaderLen)
		for {
			n, from, err := udp.ReadFromUDPAddrPort(b)
			if err != nil {
				return
			}
			to, payload, err := parser.Parse(b[:n])
			if err != nil {
				t.Errorf("relay got a bad datagram: %v", err)
				continue
			}
			echo = append(append(echo[:0], "echo:"...), payload...)
			out = socks5.AppendUDP(out[:0], to, echo)
			udp.WriteToUDPAddrPort(out, from)
		}
	}()
	t.Cleanup(func() { udp.Close(); wg.Wait() })
	return r, r.start(t)
}

func readPacket(t *testing.T, l netx.PacketLink, size int) (string, netx.Addr) {
	t.Helper()
	type result struct {
		n    int
		from netx.Addr
		err  error
	}
	buf := make([]byte, size)
	done := make(chan result, 1)
	go func() {
		n, from, err := l.ReadPacket(buf)
		done <- result{n, from, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("ReadPacket: %v", r.err)
		}
		return string(buf[:r.n]), r.from
	case <-time.After(5 * time.Second):
		l.Close()
		<-done
		t.Fatal("no datagram")
	}
	return "", netx.Addr{}
}

func dialPacket(t *testing.T, o *Outbound) *link {
	t.Helper()
	pl, err := o.DialPacket(proxytest.Ctx(t), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	if !o.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	t.Cleanup(func() { pl.Close() })
	return pl.(*link)
}

// One association reaches many peers: each datagram names its own, and each
// reply comes back attributed to the peer its header names.
func TestAssociateCarriesPerPacketAddresses(t *testing.T) {
	for _, tc := range []struct{ name, user, pass string }{{"no auth", "", ""}, {"user and password", "alice", "pw"}} {
		t.Run(tc.name, func(t *testing.T) {
			r, addr := startRelay(t, "udp4", tc.user, tc.pass, nil)
			l := dialPacket(t, newOutbound(t, addr, tc.user, tc.pass, nil))
			if req := <-r.requests; req.Cmd != socks5.CmdUDPAssociate || req.Dst != (netx.Addr{IP: netip.IPv4Unspecified()}) {
				t.Fatalf("request %+v, want UDP ASSOCIATE 0.0.0.0:0", req)
			}
			peers := []netx.Addr{
				netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:53")),
				netx.DomainAddr("peer.example", 443),
				netx.AddrFromAddrPort(netip.MustParseAddrPort("[2001:db8::5]:7")),
			}
			for i, peer := range peers {
				msg := strings.Repeat("x", i*500+1)
				if err := l.WritePacket([]byte(msg), peer); err != nil {
					t.Fatal(err)
				}
				got, from := readPacket(t, l, 2048)
				if got != "echo:"+msg || from != peer {
					t.Fatalf("reply of %d bytes from %v, want %d from %v", len(got), from, len(msg)+5, peer)
				}
			}
		})
	}
}

// A relay named 0.0.0.0 (or ::) is the IP of the server the control
// connection reached; an IPv4-mapped relay is the IPv4 one.
func TestAssociateRelayAddress(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bound func(relay netip.AddrPort) netx.Addr
	}{
		{"unspecified IPv4", func(r netip.AddrPort) netx.Addr { return netx.Addr{IP: netip.IPv4Unspecified(), Port: r.Port()} }},
		{"unspecified IPv6", func(r netip.AddrPort) netx.Addr { return netx.Addr{IP: netip.IPv6Unspecified(), Port: r.Port()} }},
		{"IPv4-mapped", func(r netip.AddrPort) netx.Addr {
			return netx.Addr{IP: netip.AddrFrom16(r.Addr().As16()), Port: r.Port()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := startRelay(t, "udp4", "", "", tc.bound)
			l := dialPacket(t, newOutbound(t, addr, "", "", nil))
			if l.relay.Addr() != netip.MustParseAddr("127.0.0.1") {
				t.Fatalf("relay %v", l.relay)
			}
			peer := netx.DomainAddr("peer.example", 53)
			l.WritePacket([]byte("q"), peer)
			if got, from := readPacket(t, l, 100); got != "echo:q" || from != peer {
				t.Fatalf("reply %q from %v", got, from)
			}
		})
	}
	t.Run("IPv6", func(t *testing.T) {
		_, addr := startRelay(t, "udp6", "", "", nil)
		h := &proxytest.Hook{}
		l := dialPacket(t, newOutbound(t, addr, "", "", h))
		if !slices.Equal(h.Networks(), []string{"tcp4", "udp6"}) {
			t.Fatalf("sockets %v: the relay socket is not in the relay's family", h.Networks())
		}
		l.WritePacket([]byte("q6"), netx.DomainAddr("peer.example", 53))
		if got, _ := readPacket(t, l, 100); got != "echo:q6" {
			t.Fatalf("reply %q", got)
		}
	})
}

func TestAssociateRefusals(t *testing.T) {
	t.Run("a relay named by a domain", func(t *testing.T) {
		_, addr := startRelay(t, "udp4", "", "", func(r netip.AddrPort) netx.Addr { return netx.DomainAddr("relay.example", r.Port()) })
		h := &proxytest.Hook{}
		_, err := newOutbound(t, addr, "", "", h).DialPacket(proxytest.Ctx(t), netx.Flow{Network: netx.UDP})
		if !errors.Is(err, ErrRelayDomain) || !errors.Is(err, errors.ErrUnsupported) || err.Error() != "socks: the relay address is a domain" {
			t.Fatalf("error %v", err)
		}
		if !slices.Equal(h.Networks(), []string{"tcp4"}) {
			t.Fatalf("sockets %v: a relay socket was bound before the reply was checked", h.Networks())
		}
	})
	t.Run("a rejected request", func(t *testing.T) {
		s := &server{status: socks5.ReplyCommandNotSupported}
		_, err := newOutbound(t, s.start(t), "", "", nil).DialPacket(proxytest.Ctx(t), netx.Flow{Network: netx.UDP})
		if !errors.Is(err, syscall.ECONNREFUSED) || err.Error() != "server rejects request: 7 (command not supported)" {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a rejected account", func(t *testing.T) {
		s := &server{user: "alice", pass: "pw"}
		_, err := newOutbound(t, s.start(t), "alice", "nope", nil).DialPacket(proxytest.Ctx(t), netx.Flow{Network: netx.UDP})
		if !errors.Is(err, socks5.ErrAuthRejected) {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("a server closing mid-handshake", func(t *testing.T) {
		addr := proxytest.Listen(t, func(c net.Conn) { socks5.ReadGreeting(c); c.Write([]byte{5, 0}); socks5.ReadRequest(c) })
		_, err := newOutbound(t, addr, "", "", nil).DialPacket(proxytest.Ctx(t), netx.Flow{Network: netx.UDP})
		if !errors.Is(err, ErrHandshakeClosed) {
			t.Fatalf("error %v", err)
		}
	})
}

// The association's control connection is a stream socket and its relay
// socket a datagram socket, both under the socket policy; refusing either
// fails the open and leaves nothing open.
func TestAssociateUnderTheSocketPolicy(t *testing.T) {
	r, addr := startRelay(t, "udp4", "", "", nil)
	h := &proxytest.Hook{}
	o := newOutbound(t, addr, "", "", h)
	dialPacket(t, o)
	if c, err := o.DialStream(proxytest.Ctx(t), proxytest.TCPFlow("example.com:80")); err == nil {
		c.Close()
	} else {
		t.Fatal(err)
	}
	if got := h.Networks(); !slices.Equal(got, []string{"tcp4", "udp4", "tcp4"}) {
		t.Fatalf("hooked sockets %v, want [tcp4 udp4 tcp4]", got)
	}
	<-r.control

	for _, refuse := range []string{"tcp4", "udp4"} {
		h := &proxytest.Hook{Refuse: map[string]bool{refuse: true}}
		_, err := newOutbound(t, addr, "", "", h).DialPacket(proxytest.Ctx(t), netx.Flow{Network: netx.UDP})
		if !errors.Is(err, proxytest.ErrRefusedByHook) {
			t.Fatalf("refusing %s: %v", refuse, err)
		}
		if refuse == "udp4" {
			select {
			case c := <-r.control:
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, syscall.ETIMEDOUT) {
					t.Fatalf("the control connection stayed open: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("no association was requested")
			}
		}
	}
}

// Only the relay's datagrams are delivered; a datagram from another source
// or with a header that does not parse is skipped; a long payload is
// truncated to the caller's buffer.
func TestAssociateAcceptsOnlyTheRelay(t *testing.T) {
	r, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	local := l.udp.LocalAddr().(*net.UDPAddr).AddrPort()
	local = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), local.Port())

	stranger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer stranger.Close()
	peer := netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.9:9"))
	stranger.WriteToUDPAddrPort(socks5.AppendUDP(nil, peer, []byte("spoofed")), local)
	r.udp.WriteToUDPAddrPort([]byte{0, 0, 1, 1, 127, 0, 0, 1, 0, 9, 'f'}, local) // a fragment
	r.udp.WriteToUDPAddrPort([]byte{0, 0, 0, 7}, local)                          // an unknown address type
	r.udp.WriteToUDPAddrPort(socks5.AppendUDP(nil, peer, []byte("genuine and long")), local)
	got, from := readPacket(t, l, 7)
	if got != "genuine" || from != peer {
		t.Fatalf("read %q from %v, want the relay's datagram, truncated", got, from)
	}
}

// Bytes the server sends on the control connection are discarded; its end
// ends the association: a blocked read and every later call fail with
// ErrControlClosed.
func TestAssociateEndsWithTheControlConnection(t *testing.T) {
	r, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	control := <-r.control
	control.Write(bytes.Repeat([]byte("noise"), 200))
	peer := netx.DomainAddr("peer.example", 53)
	l.WritePacket([]byte("a"), peer)
	if got, _ := readPacket(t, l, 100); got != "echo:a" {
		t.Fatalf("reply %q", got)
	}

	errc := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 100))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	control.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrControlClosed) || !errors.Is(err, syscall.EPIPE) || err.Error() != "socks: the control connection closed" {
			t.Fatalf("blocked read: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked read did not end with the control connection")
	}
	if err := l.WritePacket([]byte("b"), peer); !errors.Is(err, ErrControlClosed) {
		t.Fatalf("write after the end: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 100)); !errors.Is(err, ErrControlClosed) {
		t.Fatalf("read after the end: %v", err)
	}
}

// A control read error is returned once as it is; later calls fail with
// ErrControlClosed.
func TestAssociateControlErrorIsReturnedOnce(t *testing.T) {
	r, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	control := <-r.control
	control.(*net.TCPConn).SetLinger(0)
	control.Close() // a reset
	deadline := time.Now().Add(5 * time.Second)
	for !l.ended.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	first := l.WritePacket([]byte("a"), netx.DomainAddr("peer.example", 53))
	if !errors.Is(first, syscall.ECONNRESET) {
		t.Fatalf("first call: %v, want the reset", first)
	}
	if _, _, err := l.ReadPacket(make([]byte, 10)); !errors.Is(err, ErrControlClosed) {
		t.Fatalf("second call: %v", err)
	}
}

func TestAssociateClose(t *testing.T) {
	_, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	errc := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 100))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("blocked read after Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := l.WritePacket([]byte("x"), netx.DomainAddr("p.example", 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after Close: %v", err)
	}
}

func TestAssociateFrameLimit(t *testing.T) {
	_, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	peer := netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.1:53")) // a 10-byte header
	if err := l.WritePacket(make([]byte, maxDatagram4-9), peer); !errors.Is(err, proxyconn.ErrFrameTooLarge) || err.Error() != "frame larger than the client runtime's buffer" {
		t.Fatalf("oversized datagram: %v", err)
	}
	if err := l.WritePacket(make([]byte, 1<<20), peer); !errors.Is(err, proxyconn.ErrFrameTooLarge) {
		t.Fatalf("huge datagram: %v", err)
	}
	if err := l.WritePacket(make([]byte, maxDatagram4-10), peer); err != nil {
		t.Fatalf("largest datagram: %v", err)
	}
	if err := l.WritePacket([]byte("x"), netx.DomainAddr(strings.Repeat("n", 256), 1)); err == nil {
		t.Fatal("a name longer than 255 bytes was sent")
	}
}

// In steady state a datagram out and its reply in, waited for and read,
// allocate nothing. Under the race detector the buffer pools drop some of
// what they are given, so the count is left to the run without it.
func TestAssociateAllocations(t *testing.T) {
	if proxytest.RaceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	_, addr := startRelay(t, "udp4", "", "", nil)
	l := dialPacket(t, newOutbound(t, addr, "", "", nil))
	peer := netx.DomainAddr("peer.example", 53)
	payload := make([]byte, 1200)
	buf := make([]byte, 2048)
	allocs := testing.AllocsPerRun(50, func() {
		if err := l.WritePacket(payload, peer); err != nil {
			t.Fatal(err)
		}
		if _, err := l.WaitPacket(); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.ReadPacket(buf); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per datagram round trip", allocs)
	}
}
