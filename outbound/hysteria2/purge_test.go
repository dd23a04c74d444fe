package hysteria2

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"switchyard/internal/slot"
	"switchyard/netx"
)

// closedConns is how many of the connections the server saw have ended.
func closedConns(srv *testServer) int {
	n := 0
	for _, c := range srv.Conns() {
		if c.Closed {
			n++
		}
	}
	return n
}

// After Purge the next flow brings a new connection up; a stream and a UDP
// session open on the old one keep working, and the old one closes once
// the last of them ends.
func TestPurgeDrainsTheConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	echo, peer := tcpEcho(t), udpEcho(t, "p0:")
	old, err := o.DialStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: echo})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	echoOnce(t, old, "before the purge")
	link := dialLink(t, o)
	if got, _ := exchange(t, link, peer, []byte("x")); string(got) != "p0:x" {
		t.Fatalf("reply %q", got)
	}

	o.Purge()
	dialEcho(t, o, echo)
	if n := srv.sessions.Load(); n != 2 {
		t.Fatalf("%d server sessions after a purge, want 2", n)
	}
	if n := h.sockets.count(); n != 2 {
		t.Fatalf("%d sockets after a purge, want 2", n)
	}
	// The purged connection still carries its flows.
	echoOnce(t, old, "still on the purged connection")
	if got, _ := exchange(t, link, peer, []byte("y")); string(got) != "p0:y" {
		t.Fatalf("reply %q", got)
	}
	if n := closedConns(srv); n != 0 {
		t.Fatalf("%d connections ended while the purged one carried flows", n)
	}
	// A new link goes to the new connection.
	fresh := dialLink(t, o)
	if got, _ := exchange(t, fresh, peer, []byte("z")); string(got) != "p0:z" {
		t.Fatalf("reply %q", got)
	}
	if n := srv.sessions.Load(); n != 2 {
		t.Fatalf("%d server sessions, want 2", n)
	}

	old.Close()
	time.Sleep(50 * time.Millisecond)
	if n := closedConns(srv); n != 0 {
		t.Fatal("the purged connection closed while its UDP session was open")
	}
	link.Close()
	waitFor(t, "the purged connection to close", func() bool { return closedConns(srv) == 1 })
	if c := srv.Conns(); !c[0].Closed || c[1].Closed {
		t.Fatalf("connections %+v: want the first closed, the second open", c)
	}
	dialEcho(t, o, echo)
	if n := srv.sessions.Load(); n != 2 {
		t.Fatalf("%d server sessions, want 2", n)
	}
}

// A purged connection with no flow closes at once; Purge with nothing up
// does nothing, and leaves the backoff as it is.
func TestPurgeIdleConnection(t *testing.T) {
	srv := startServer(t, serverOptions{})
	h := newHarness(t)
	o := h.outbound(testSpec(srv.addr, srv.cert))
	o.Purge() // nothing up yet
	echo := tcpEcho(t)
	dialEcho(t, o, echo)
	o.Purge()
	waitFor(t, "the idle purged connection to close", func() bool { return closedConns(srv) == 1 })
	if st, failures := snapshot(o); st != slot.Idle || failures != 0 {
		t.Fatalf("after a purge the slot is %v with %d failures, want idle with none", st, failures)
	}
	dialEcho(t, o, echo)
	if n := srv.sessions.Load(); n != 2 {
		t.Fatalf("%d server sessions, want 2", n)
	}
	o.Purge()
	o.Purge()
	waitFor(t, "both connections to close", func() bool { return closedConns(srv) == 2 })
}

// Close ends the purged connections still draining, with their flows.
func TestCloseEndsDrainingConnections(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	old, err := o.DialStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: tcpEcho(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	link := dialLink(t, o)
	o.Purge()
	o.Close()
	waitFor(t, "the purged connection to close", func() bool { return closedConns(srv) == 1 })
	old.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := old.Read(make([]byte, 1)); err == nil || errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		t.Fatalf("a stream of a purged connection after Close: %v", err)
	}
	if _, _, err := link.ReadPacket(make([]byte, 100)); err == nil {
		t.Fatal("a UDP session of a purged connection read after Close")
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Purges racing dials and flow ends break no dial, and every connection
// ends with the outbound.
func TestPurgeConcurrentWithDials(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	echo, peer := tcpEcho(t), udpEcho(t, "p0:")
	stop := make(chan struct{})
	var purger sync.WaitGroup
	purger.Add(1)
	go func() {
		defer purger.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
				o.Purge()
			}
		}
	}()
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 8 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := flowOnce(ctx, o, i%2 == 0, echo, peer)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	purger.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	o.Close()
	waitFor(t, "every connection to end", func() bool { return closedConns(srv) == len(srv.Conns()) })
	if n := o.slot.State().Retired; n != 0 {
		t.Fatalf("%d connections still draining after Close", n)
	}
}

// flowOnce carries one stream (or one UDP session) through o and closes it.
func flowOnce(ctx context.Context, o *Outbound, tcp bool, echo, peer netx.Addr) error {
	if tcp {
		c, err := o.DialStream(ctx, netx.Flow{Network: netx.TCP, Dst: echo})
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		_, err = c.Read(make([]byte, 4))
		return err
	}
	l, err := o.DialPacket(ctx, netx.Flow{Network: netx.UDP})
	if err != nil {
		return err
	}
	defer l.Close()
	got := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 100))
		got <- err
	}()
	for {
		if err := l.WritePacket([]byte("ping"), peer); err != nil {
			l.Close()
			<-got
			return err
		}
		select {
		case err := <-got:
			return err
		case <-time.After(500 * time.Millisecond): // a datagram lost: again
		case <-ctx.Done():
			l.Close()
			<-got
			return ctx.Err()
		}
	}
}

// The family of the server address the connection runs to: unknown before
// one is up, then the outbound's, each UDP session's and each stream's
// RemoteAddr tell it.
func TestServerFamily(t *testing.T) {
	srv := startServer(t, serverOptions{})
	o := newHarness(t).outbound(testSpec(srv.addr, srv.cert))
	if _, ok := o.ServerFamily(); ok {
		t.Fatal("a family before any connection")
	}
	c, err := o.DialStream(context.Background(), netx.Flow{Network: netx.TCP, Dst: tcpEcho(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if f, ok := o.ServerFamily(); !ok || f != netx.V4 {
		t.Fatalf("outbound family %v, %v; want IPv4", f, ok)
	}
	if a, ok := c.RemoteAddr().(*net.UDPAddr); !ok || a.AddrPort() != srv.addr {
		t.Fatalf("stream RemoteAddr %v, want the server %v", c.RemoteAddr(), srv.addr)
	}
	l := dialLink(t, o)
	r, ok := l.(interface{ ServerFamily() (netx.Family, bool) })
	if !ok {
		t.Fatalf("%T reports no family", l)
	}
	if f, ok := r.ServerFamily(); !ok || f != netx.V4 {
		t.Fatalf("link family %v, %v; want IPv4", f, ok)
	}
	o.Purge()
	if _, ok := o.ServerFamily(); ok {
		t.Fatal("a family after a purge, before the next connection")
	}
	if f, ok := r.ServerFamily(); !ok || f != netx.V4 {
		t.Fatalf("the link's family after a purge: %v, %v", f, ok)
	}

	v6 := &conn{server: netip.MustParseAddrPort("[2001:db8::1]:443")}
	mapped := &conn{server: netip.MustParseAddrPort("[::ffff:192.0.2.1]:443")}
	if f, ok := v6.family(); !ok || f != netx.V6 {
		t.Fatalf("family of %v: %v, %v", v6.server, f, ok)
	}
	if f, ok := mapped.family(); !ok || f != netx.V4 {
		t.Fatalf("family of %v: %v, %v", mapped.server, f, ok)
	}
}
