package hysteria2

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"switchyard/netx"
)

// With max_concurrent_streams open, a further flow waits for one to close:
// it fails when its context ends first, and gets the freed place after.
func TestMaxConcurrentStreamsCapsTheOpenStreams(t *testing.T) {
	srv := startServer(t, serverOptions{})
	sp := testSpec(srv.addr, srv.cert)
	sp.MaxConcurrentStreams = 2
	o := newHarness(t).outbound(sp)
	echo := tcpEcho(t)
	open := func(ctx context.Context) (net.Conn, error) {
		return o.DialStream(ctx, netx.Flow{Network: netx.TCP, Dst: echo})
	}
	var held []net.Conn
	for range 2 {
		c, err := open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		echoOnce(t, c, "held")
		held = append(held, c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if c, err := open(ctx); err == nil {
		c.Close()
		t.Fatal("a third stream opened with max_concurrent_streams = 2")
	} else if !errors.Is(err, context.DeadlineExceeded) || err.Error() != "hysteria2: all 2 streams of the connection are open (max_concurrent_streams): context deadline exceeded" {
		t.Fatalf("third stream: %v", err)
	}

	// A failed dial gives its place back: a refused destination does not
	// use one up.
	held[0].Close()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := netx.AddrFromAddrPort(ln.Addr().(*net.TCPAddr).AddrPort())
	ln.Close()
	if c, err := o.DialStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: closed}); err == nil {
		c.Close()
		t.Fatal("a stream to a closed port")
	}
	// Closing a stream twice frees one place only.
	held[0].Close()

	waitCtx, cancelWait := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancelWait()
	c, err := open(waitCtx)
	if err != nil {
		t.Fatalf("a stream after one closed: %v", err)
	}
	defer c.Close()
	echoOnce(t, c, "third")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if c, err := open(ctx2); err == nil {
		c.Close()
		t.Fatal("closing a stream twice freed two places")
	}
}

// Without a cap (0), streams are not counted.
func TestNoStreamCap(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	if o.streams != nil {
		t.Fatal("a cap without max_concurrent_streams")
	}
	dialEcho(t, o, tcpEcho(t))
}
