package serve

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"
)

func tcpPair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err = net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// waitDial blocks until its context ends and returns the cause.
func waitDial(ctx context.Context) (net.Conn, error) {
	select {
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-time.After(5 * time.Second):
		return nil, errors.New("the dial was never cancelled")
	}
}

// A client that hangs up ends the dial made for it at once.
func TestWhileConnectedCancelsWhenTheClientHangsUp(t *testing.T) {
	client, server := tcpPair(t)
	go func() {
		time.Sleep(50 * time.Millisecond)
		client.Close()
	}()
	_, err := WhileConnected(context.Background(), server, waitDial)
	if !errors.Is(err, ErrClientGone) {
		t.Fatalf("dial ended with %v, want %v", err, ErrClientGone)
	}
}

// Bytes from the client prove it is there: they do not cancel the dial and
// stay unread, and the conn's read deadline is clear afterwards.
func TestWhileConnectedKeepsAClientThatSends(t *testing.T) {
	client, server := tcpPair(t)
	client.Write([]byte("early"))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := WhileConnected(ctx, server, waitDial)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("dial ended with %v, want the caller's own deadline", err)
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		client.Write([]byte("!"))
	}()
	b := make([]byte, 6)
	n := 0
	for n < len(b) {
		m, err := server.Read(b[n:])
		if err != nil {
			t.Fatalf("read after the dial: %v (a deadline was left behind?)", err)
		}
		n += m
	}
	if string(b) != "early!" {
		t.Fatalf("read %q", b)
	}
}

// A dial that succeeds returns its conn and stops the watch.
func TestWhileConnectedReturnsTheDial(t *testing.T) {
	_, server := tcpPair(t)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	up, err := WhileConnected(context.Background(), server, func(context.Context) (net.Conn, error) { return a, nil })
	if err != nil || up != a {
		t.Fatalf("got %v, %v", up, err)
	}
}
