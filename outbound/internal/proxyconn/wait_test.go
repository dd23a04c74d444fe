package proxyconn

import (
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

type waited struct {
	n   int
	err error
}

func waitPacket(l *Link) <-chan waited {
	c := make(chan waited, 1)
	go func() {
		n, err := l.WaitPacket()
		c <- waited{n, err}
	}()
	return c
}

// WaitPacket blocks until a packet's frame is whole, skips frames without a
// packet, and returns the payload's exact size, which ReadPacket returns.
func TestLinkWaitPacket(t *testing.T) {
	l, peer := pipeLink(t)
	c := waitPacket(l)
	wire := append(frame(0, "skip"), frame(1, "hello")...)
	go peer.Write(wire[:9]) // the skipped frame and part of the next
	select {
	case w := <-c:
		t.Fatalf("WaitPacket returned %d, %v before a whole packet", w.n, w.err)
	case <-time.After(50 * time.Millisecond):
	}
	go peer.Write(wire[9:])
	var w waited
	select {
	case w = <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("WaitPacket did not return for a packet")
	}
	if w.err != nil || w.n != len("hello") {
		t.Fatalf("WaitPacket: %d, %v", w.n, w.err)
	}
	if n, err := l.WaitPacket(); err != nil || n != 5 {
		t.Fatalf("WaitPacket again: %d, %v; want the same packet", n, err)
	}
	p := make([]byte, w.n)
	n, from, err := l.ReadPacket(p)
	if err != nil || string(p[:n]) != "hello" || from != lenPeer {
		t.Fatalf("ReadPacket: %q from %v, %v", p[:n], from, err)
	}
	go peer.Write(frame(1, "next"))
	if n, _, err := l.ReadPacket(p); err != nil || string(p[:n]) != "next" {
		t.Fatalf("ReadPacket without a wait: %q, %v", p[:n], err)
	}
}

// WaitPacket fails as ReadPacket would: a deadline lets both resume, the
// stream's end and a bad frame are final, and Close ends a blocked wait.
func TestLinkWaitPacketErrors(t *testing.T) {
	l, peer := pipeLink(t)
	l.conn.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := l.WaitPacket(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WaitPacket past a deadline: %v", err)
	}
	l.conn.SetReadDeadline(time.Time{})
	go peer.Write(frame(1, "ok"))
	if n, err := l.WaitPacket(); err != nil || n != 2 {
		t.Fatalf("WaitPacket after the deadline: %d, %v", n, err)
	}
	l.ReadPacket(make([]byte, 2))
	go peer.Write(frame(0xff, "bad"))
	if _, err := l.WaitPacket(); err == nil || err.Error() != "tag 0xff" {
		t.Fatalf("WaitPacket on a bad frame: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 10)); err == nil || err.Error() != "tag 0xff" {
		t.Fatalf("ReadPacket after the bad frame: %v", err)
	}

	l, peer = pipeLink(t)
	peer.Close()
	if _, err := l.WaitPacket(); err != io.EOF {
		t.Fatalf("WaitPacket at the end of the stream: %v", err)
	}
	if _, _, err := l.ReadPacket(make([]byte, 10)); err != io.EOF {
		t.Fatalf("ReadPacket at the end of the stream: %v", err)
	}

	l, _ = pipeLink(t)
	c := waitPacket(l)
	time.Sleep(20 * time.Millisecond)
	l.Close()
	select {
	case w := <-c:
		if w.err == nil {
			t.Fatal("WaitPacket after Close returned no error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end WaitPacket")
	}
}
