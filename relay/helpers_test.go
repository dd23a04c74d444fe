package relay_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"switchyard/relay"
)

// tcpPair returns the two ends of one loopback TCP connection.
func tcpPair(tb testing.TB) (*net.TCPConn, *net.TCPConn) {
	tb.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, _ := ln.AcceptTCP()
		accepted <- c
	}()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		tb.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		tb.Fatal("accept failed")
	}
	tb.Cleanup(func() { c.Close(); s.Close() })
	return c, s
}

// plainConn hides the TCP conn beneath from the relay (it is no
// netx.Observed), so the relay copies in userspace; it keeps CloseWrite.
type plainConn struct{ *net.TCPConn }

// pattern is n deterministic bytes.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7)
	}
	return b
}

// relayed runs relay.Pipe(a, b, idle) and delivers its result.
func relayed(a, b net.Conn, idle time.Duration) <-chan relay.Result {
	done := make(chan relay.Result, 1)
	go func() { done <- relay.Pipe(context.Background(), a, b, idle) }()
	return done
}

// readAll reads c to EOF and reports what it read.
func readAll(c net.Conn) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(c)
		got <- b
	}()
	return got
}

func wait[T any](tb testing.TB, ch <-chan T, what string) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func same(tb testing.TB, what string, got, want []byte) {
	tb.Helper()
	if !bytes.Equal(got, want) {
		tb.Fatalf("%s: got %d bytes, want %d (equal prefix: %v)", what, len(got), len(want),
			len(got) <= len(want) && bytes.Equal(got, want[:len(got)]))
	}
}
