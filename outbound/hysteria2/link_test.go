package hysteria2

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
)

func dialLink(t *testing.T, o *Outbound) netx.PacketLink {
	t.Helper()
	l, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	if !o.CarriesUDP() {
		t.Fatal("an outbound whose DialPacket opens a link reports CarriesUDP false")
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// exchange sends payload to the peer at to and reads one reply, retrying
// once if a datagram is lost.
func exchange(t *testing.T, l netx.PacketLink, to netx.Addr, payload []byte) ([]byte, netx.Addr) {
	t.Helper()
	replies := make(chan struct {
		b    []byte
		from netx.Addr
		err  error
	}, 1)
	go func() {
		buf := make([]byte, 65535)
		n, from, err := l.ReadPacket(buf)
		replies <- struct {
			b    []byte
			from netx.Addr
			err  error
		}{buf[:n], from, err}
	}()
	if err := l.WritePacket(payload, to); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-replies:
		if r.err != nil {
			t.Fatal(r.err)
		}
		return r.b, r.from
	case <-time.After(5 * time.Second):
		l.Close()
		<-replies
		t.Fatalf("no reply from %s", to)
		return nil, netx.Addr{}
	}
}

func TestDatagramsReachEachPeerAndComeBackAttributed(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	peers := []netx.Addr{udpEcho(t, "p0:"), udpEcho(t, "p1:")}
	// 3000 bytes exceed one QUIC datagram: core/v2 fragments and reassembles.
	for _, size := range []int{1, 100, 1400, 3000} {
		for i, to := range peers {
			payload := make([]byte, size)
			rand.Read(payload)
			got, from := exchange(t, l, to, payload)
			want := append([]byte(fmt.Sprintf("p%d:", i)), payload...)
			if from != to || !bytes.Equal(got, want) {
				t.Fatalf("%d bytes to %s: reply of %d bytes from %s", size, to, len(got), from)
			}
		}
	}
	// A domain goes as a name for the server to resolve.
	named := netx.DomainAddr("localhost", peers[0].Port)
	got, from := exchange(t, l, named, []byte("by name"))
	if from != peers[0] || string(got) != "p0:by name" {
		t.Fatalf("to %s: %q from %s", named, got, from)
	}
	if n := srv.sessions.Load(); n != 1 {
		t.Fatalf("%d server sessions", n)
	}
}

func TestRepliesFromUnparsableSourcesAreSkipped(t *testing.T) {
	srv := startServer(t, serverOptions{outbound: badSourceOutbound{}})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	peer := udpEcho(t, "ok:")
	// The server delivers the reply three times: from "not an address",
	// from port 0, and from the peer. Only the last is a reply.
	got, from := exchange(t, l, peer, []byte("x"))
	if from != peer || string(got) != "ok:x" {
		t.Fatalf("reply %q from %s", got, from)
	}
	got, from = exchange(t, l, peer, []byte("y"))
	if from != peer || string(got) != "ok:y" {
		t.Fatalf("second reply %q from %s: a skipped reply was delivered", got, from)
	}
}

func TestAServerThatRelaysNoUDPIsRefusedAndLoggedOnce(t *testing.T) {
	srv := startServer(t, serverOptions{disableUDP: true})
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	for range 3 {
		_, err := o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
		if err == nil || err.Error() != "hysteria2: the server does not relay UDP" {
			t.Fatalf("DialPacket: %v", err)
		}
		if !errors.Is(err, outbound.ErrNoUDP) {
			t.Fatal("the refusal does not match outbound.ErrNoUDP")
		}
	}
	if !o.CarriesUDP() {
		// What the server answers is learnt at admission: the
		// configuration still carries UDP.
		t.Fatal("a server's refusal turned CarriesUDP false")
	}
	const warning = "hysteria2: the server does not relay UDP; datagrams routed to this outbound are dropped"
	if n := h.logs.count(warning); n != 1 {
		t.Fatalf("warning logged %d times, want once:\n%s", n, h.logs)
	}
	dialEcho(t, o, tcpEcho(t)) // TCP is unaffected
}

func TestAServerWithoutQUICDatagramsIsRefused(t *testing.T) {
	srv := startCloserWith(t, 0, false)
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	err := l.WritePacket([]byte("x"), udpEcho(t, ""))
	if err == nil || err.Error() != "hysteria2: the server did not offer QUIC datagrams" {
		t.Fatalf("WritePacket: %v", err)
	}
	for range 2 {
		_, err = o.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
		if err == nil || err.Error() != "hysteria2: the server did not offer QUIC datagrams" || !errors.Is(err, outbound.ErrNoUDP) {
			t.Fatalf("DialPacket: %v", err)
		}
	}
	const warning = "hysteria2: the server did not offer QUIC datagrams; datagrams routed to this outbound are dropped"
	if n := h.logs.count(warning); n != 1 {
		t.Fatalf("warning logged %d times, want once:\n%s", n, h.logs)
	}
}

func TestTheLinkEndsWithTheConnection(t *testing.T) {
	srv := startCloser(t, 0)
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	errc := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 2048))
		errc <- err
	}()
	srv.closeAll()
	select {
	case err := <-errc:
		if err == nil || err.Error() != "hysteria2: the connection behind this association is gone" {
			t.Fatalf("ReadPacket: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadPacket still blocked after the connection ended")
	}
	if err := l.WritePacket([]byte("x"), udpEcho(t, "")); !errors.Is(err, errGone) {
		t.Fatalf("WritePacket after the connection ended: %v", err)
	}
}

func TestClosingALinkWakesItsReadAndKeepsTheConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	errc := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 2048))
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	if err := <-errc; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadPacket after Close: %v", err)
	}
	if err := l.WritePacket([]byte("x"), udpEcho(t, "")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WritePacket after Close: %v", err)
	}
	peer := udpEcho(t, "")
	if got, _ := exchange(t, dialLink(t, o), peer, []byte("again")); string(got) != "again" {
		t.Fatalf("a new link: %q", got)
	}
}

func TestFramesLargerThanTheBuffers(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	peer := udpEcho(t, "")
	hdr := udpHeaderSize(peer.String())
	if err := l.WritePacket(make([]byte, maxUDPSize-hdr+1), peer); err == nil || err.Error() != "frame larger than the client runtime's buffer" {
		t.Fatalf("WritePacket past the send buffer: %v", err)
	}
	if err := l.WritePacket(make([]byte, 100), peer); err != nil {
		t.Fatal(err)
	}
	_, _, err := l.ReadPacket(make([]byte, 10))
	if err == nil || err.Error() != "upstream frame larger than the client runtime's buffer" {
		t.Fatalf("ReadPacket into a small buffer: %v", err)
	}
}
