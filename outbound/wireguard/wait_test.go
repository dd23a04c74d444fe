package wireguard

import (
	"context"
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

func waitPacket(l netx.PacketWaiter) <-chan waited {
	c := make(chan waited, 1)
	go func() {
		n, err := l.WaitPacket()
		c <- waited{n, err}
	}()
	return c
}

func dialLink(t *testing.T, c *client) *packetLink {
	t.Helper()
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*packetLink)
}

// waitReply sends payload to `to` until WaitPacket returns (a datagram may
// be lost while the handshake completes) and returns what it returned.
func waitReply(t *testing.T, l *packetLink, to netx.Addr, payload []byte) waited {
	t.Helper()
	c := waitPacket(l)
	for range 3 {
		if err := l.WritePacket(payload, to); err != nil {
			t.Fatal(err)
		}
		select {
		case w := <-c:
			return w
		case <-time.After(3 * time.Second):
		}
	}
	t.Fatalf("no reply from %s", to)
	return waited{}
}

// WaitPacket blocks until a datagram arrives, returns its exact size and
// leaves it for ReadPacket, which reads it whole into a buffer of that size
// (a datagram larger than the tunnel's MTU too); a second wait before the
// read returns the same size.
func TestPacketLinkWaitPacket(t *testing.T) {
	_, c := pair(t, "", nil)
	l := dialLink(t, c)
	echo := mustAddr("10.7.0.1:9001")
	for _, size := range []int{0, 1, 1400, 16 << 10} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i)
		}
		w := waitReply(t, l, echo, payload)
		if w.err != nil || w.n != len("p0:")+size {
			t.Fatalf("WaitPacket for %d bytes: %d, %v", size, w.n, w.err)
		}
		if n, err := l.WaitPacket(); err != nil || n != w.n {
			t.Fatalf("WaitPacket again: %d, %v; want %d", n, err, w.n)
		}
		p := make([]byte, w.n)
		n, from, err := l.ReadPacket(p)
		if err != nil || n != w.n || from != echo || string(p[:3]) != "p0:" || (size > 0 && p[n-1] != byte(size-1)) {
			t.Fatalf("ReadPacket of %d bytes: %d from %s, %v", w.n, n, from, err)
		}
	}
	// Nothing left: a wait blocks.
	select {
	case w := <-waitPacket(l):
		t.Fatalf("WaitPacket returned %d, %v with nothing sent", w.n, w.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// Close ends a blocked WaitPacket with net.ErrClosed, as it ends a
// ReadPacket, and every later call fails so; so does the outbound's Close,
// which ends the tunnel. No goroutine is left (TestMain checks).
func TestPacketLinkWaitPacketEnds(t *testing.T) {
	_, c := pair(t, "", nil)
	l := dialLink(t, c)
	w := waitPacket(l)
	time.Sleep(20 * time.Millisecond)
	l.Close()
	select {
	case got := <-w:
		if !errors.Is(got.err, net.ErrClosed) {
			t.Fatalf("blocked WaitPacket after Close: %d, %v", got.n, got.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a blocked WaitPacket")
	}
	if _, err := l.WaitPacket(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitPacket after Close: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("ReadPacket after Close: %v", err)
	}

	l = dialLink(t, c)
	w = waitPacket(l)
	time.Sleep(20 * time.Millisecond)
	c.Close()
	select {
	case got := <-w:
		if !errors.Is(got.err, net.ErrClosed) {
			t.Fatalf("blocked WaitPacket after the tunnel's Close: %d, %v", got.n, got.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the tunnel's Close did not end a blocked WaitPacket")
	}
	if _, err := l.WaitPacket(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WaitPacket after the tunnel's Close: %v", err)
	}
}
