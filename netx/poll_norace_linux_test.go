//go:build !race

package netx

import (
	"context"
	"net"
	"net/netip"
	"testing"
)

// A poll read allocates nothing, with a datagram waiting or none.
func TestPollReadAllocatesNothing(t *testing.T) {
	var d Dialer
	u, err := d.BindDual(context.Background(), []Family{V4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	srcs := u.PollSources(func() {})
	if len(srcs) != 1 {
		t.Fatalf("%d sources", len(srcs))
	}
	peer := listenUDP(t, "udp4", "127.0.0.1:0")
	if err := u.WriteTo([]byte("out"), addrOf(peer)); err != nil {
		t.Fatal(err)
	}
	to := u.Socket(V4).LocalAddr().(*net.UDPAddr).AddrPort()
	to = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), to.Port())
	p, buf := make([]byte, 1200), make([]byte, 2048)
	sendTo(t, peer, p, to)
	waitReadable(t, srcs[0], buf)
	if n := testing.AllocsPerRun(100, func() {
		sendTo(t, peer, p, to)
		waitReadable(t, srcs[0], buf)
	}); n != 0 {
		t.Errorf("a poll read of a waiting datagram allocates %v times", n)
	}
	if n := testing.AllocsPerRun(100, func() { srcs[0].Read(buf) }); n != 0 {
		t.Errorf("a poll read with nothing waiting allocates %v times", n)
	}
}

// waitReadable reads src until it takes one datagram.
func waitReadable(t *testing.T, src PollSource, buf []byte) {
	for {
		_, _, err := src.Read(buf)
		if err == nil {
			return
		}
		if err != ErrWouldBlock {
			t.Fatal(err)
		}
	}
}
