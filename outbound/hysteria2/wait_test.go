package hysteria2

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxytest"
)

// WaitPacket blocks until a reply is received (reassembled, past the
// replies whose source does not parse) and returns its exact size, which
// ReadPacket then returns.
func TestWaitPacketReturnsTheReplysSize(t *testing.T) {
	srv := startServer(t, serverOptions{outbound: badSourceOutbound{}})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	peer := udpEcho(t, "ok:")
	c := proxytest.WaitPacket(l)
	select {
	case w := <-c:
		t.Fatalf("WaitPacket returned %d, %v with nothing sent", w.N, w.Err)
	case <-time.After(50 * time.Millisecond):
	}
	payload := bytes.Repeat([]byte("h"), 3000) // fragmented and reassembled
	if err := l.WritePacket(payload, peer); err != nil {
		t.Fatal(err)
	}
	var w proxytest.Waited
	select {
	case w = <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPacket did not return for a reply")
	}
	want := append([]byte("ok:"), payload...)
	if w.Err != nil || w.N != len(want) {
		t.Fatalf("WaitPacket: %d, %v; want %d", w.N, w.Err, len(want))
	}
	buf := make([]byte, w.N)
	n, from, err := l.ReadPacket(buf)
	if err != nil || from != peer || !bytes.Equal(buf[:n], want) {
		t.Fatalf("ReadPacket: %d bytes from %s, %v", n, from, err)
	}
}

// Close ends a blocked WaitPacket with net.ErrClosed, and every later one.
func TestWaitPacketEndsWithClose(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	c := proxytest.WaitPacket(l)
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case w := <-c:
		if !errors.Is(w.Err, net.ErrClosed) {
			t.Fatalf("blocked WaitPacket after Close: %v", w.Err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end WaitPacket")
	}
	if _, err := l.(netx.PacketWaiter).WaitPacket(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitPacket after Close: %v", err)
	}
}
