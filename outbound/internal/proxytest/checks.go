package proxytest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/outbound"
)

// RefusedAddr is a loopback address nothing listens on: a connection to it
// is refused.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// ReadFailsForGood requires that reading l fails with an error whose text
// holds want, and that the next read fails with the same error.
func ReadFailsForGood(t testing.TB, l netx.PacketLink, want string) {
	t.Helper()
	buf := make([]byte, 65536)
	_, _, err := l.ReadPacket(buf)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if _, _, again := l.ReadPacket(buf); again == nil || again.Error() != err.Error() {
		t.Fatalf("second read: %v", again)
	}
}

// DialHonoursTheContext requires that a stream dial through silent, an
// outbound whose server never answers, ends with the dial's context (its
// deadline, or its cancel) and that a stream dialed through answering,
// whose server accepts and then echoes, still carries bytes after the
// dial's context ended: the handshake left no deadline behind.
func DialHonoursTheContext(t *testing.T, silent, answering outbound.Outbound) {
	t.Helper()
	flow := TCPFlow("example.com:443")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := silent.DialStream(ctx, flow); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("deadline: %v after %v", err, time.Since(start))
	}

	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := silent.DialStream(ctx, flow); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	c, err := answering.DialStream(ctx, flow)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond)
	Echoes(t, c, []byte("still open after the dial's deadline"))
}

// Waited is what a link's WaitPacket returned.
type Waited struct {
	N   int
	Err error
}

// WaitPacket runs l's WaitPacket (l must be a netx.PacketWaiter) on a
// goroutine and delivers its result, so a test can check it blocks.
func WaitPacket(l netx.PacketLink) <-chan Waited {
	c := make(chan Waited, 1)
	go func() {
		n, err := l.(netx.PacketWaiter).WaitPacket()
		c <- Waited{n, err}
	}()
	return c
}
