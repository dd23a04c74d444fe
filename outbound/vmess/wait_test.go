package vmess

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound/internal/proxyconn"
)

// WaitPacket blocks until a datagram's chunk is opened and returns the
// exact size of the payload that ReadPacket then returns.
func TestPacketWaitPacket(t *testing.T) {
	addr := newServer(t, echo)
	l, err := newOutbound(t, addr, securities[0]).DialPacket(context.Background(), udpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := l.(netx.PacketWaiter)
	type waited struct {
		n   int
		err error
	}
	c := make(chan waited, 1)
	go func() {
		n, err := w.WaitPacket()
		c <- waited{n, err}
	}()
	select {
	case r := <-c:
		t.Fatalf("WaitPacket returned %d, %v with nothing sent", r.n, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	p := bytes.Repeat([]byte("d"), 1400)
	if err := l.WritePacket(p, echoDst); err != nil {
		t.Fatal(err)
	}
	var r waited
	select {
	case r = <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPacket did not return for a datagram")
	}
	want := append([]byte("re:"), p...)
	if r.err != nil || r.n != len(want) {
		t.Fatalf("WaitPacket: %d, %v; want %d", r.n, r.err, len(want))
	}
	if n, err := w.WaitPacket(); err != nil || n != r.n {
		t.Fatalf("WaitPacket again: %d, %v; want the same datagram", n, err)
	}
	buf := make([]byte, r.n)
	n, from, err := l.ReadPacket(buf)
	if err != nil || from != echoDst || !bytes.Equal(buf[:n], want) {
		t.Fatalf("ReadPacket: %d bytes from %v, %v", n, from, err)
	}
}

// WaitPacket fails as ReadPacket would: on a chunk too large, at the end of
// the body, and after Close.
func TestPacketWaitPacketErrors(t *testing.T) {
	addr := newServer(t, func(s *session) {
		s.header(s.req.Check)
		s.chunk(make([]byte, bufSize))
	})
	l, err := newOutbound(t, addr, "none").DialPacket(context.Background(), udpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := l.(netx.PacketWaiter)
	if _, err := w.WaitPacket(); !errors.Is(err, proxyconn.ErrUpstreamFrameTooLarge) {
		t.Fatalf("WaitPacket on a chunk too large: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 100)); !errors.Is(err, proxyconn.ErrUpstreamFrameTooLarge) {
		t.Fatalf("ReadPacket after it: %v", err)
	}

	addr = newServer(t, func(s *session) {
		s.header(s.req.Check)
		s.chunk(nil)
	})
	l, err = newOutbound(t, addr, "none").DialPacket(context.Background(), udpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w = l.(netx.PacketWaiter)
	if _, err := w.WaitPacket(); err != io.EOF {
		t.Fatalf("WaitPacket at the end of the body: %v", err)
	}

	addr = newServer(t, func(s *session) { s.header(s.req.Check); time.Sleep(time.Second) })
	l, err = newOutbound(t, addr, "none").DialPacket(context.Background(), udpFlow(echoDst))
	if err != nil {
		t.Fatal(err)
	}
	w = l.(netx.PacketWaiter)
	errc := make(chan error, 1)
	go func() { _, err := w.WaitPacket(); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("WaitPacket after Close: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end WaitPacket")
	}
}
