package hysteria2

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"switchyard/netx"
)

type waited struct {
	n   int
	err error
}

func waitPacket(l netx.PacketLink) <-chan waited {
	c := make(chan waited, 1)
	go func() {
		n, err := l.(netx.PacketWaiter).WaitPacket()
		c <- waited{n, err}
	}()
	return c
}

// WaitPacket blocks until a reply is received (reassembled, past the
// replies whose source does not parse) and returns its exact size, which
// ReadPacket then returns.
func TestWaitPacketReturnsTheReplysSize(t *testing.T) {
	srv := startServer(t, serverOptions{outbound: badSourceOutbound{}})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	l := dialLink(t, o)
	peer := udpEcho(t, "ok:")
	c := waitPacket(l)
	select {
	case w := <-c:
		t.Fatalf("WaitPacket returned %d, %v with nothing sent", w.n, w.err)
	case <-time.After(50 * time.Millisecond):
	}
	payload := bytes.Repeat([]byte("h"), 3000) // fragmented and reassembled
	if err := l.WritePacket(payload, peer); err != nil {
		t.Fatal(err)
	}
	var w waited
	select {
	case w = <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPacket did not return for a reply")
	}
	want := append([]byte("ok:"), payload...)
	if w.err != nil || w.n != len(want) {
		t.Fatalf("WaitPacket: %d, %v; want %d", w.n, w.err, len(want))
	}
	buf := make([]byte, w.n)
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
	c := waitPacket(l)
	time.Sleep(50 * time.Millisecond)
	l.Close()
	select {
	case w := <-c:
		if !errors.Is(w.err, net.ErrClosed) {
			t.Fatalf("blocked WaitPacket after Close: %v", w.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end WaitPacket")
	}
	if _, err := l.(netx.PacketWaiter).WaitPacket(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitPacket after Close: %v", err)
	}
}
