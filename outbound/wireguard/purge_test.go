package wireguard

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
)

// setSilence shortens the silence after which a purged tunnel is rebuilt.
func (c *client) setSilence(d time.Duration) {
	c.tunnels.mu.Lock()
	c.tunnels.silence = d
	c.tunnels.mu.Unlock()
}

func (c *client) tunnel() *tunnel { return tunnelOf(c) }

func dialUDP(t *testing.T, c *client) netx.PacketLink {
	t.Helper()
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readFails requires a read of conn to fail, not time out, within 5 s: the
// flow was cut.
func readFails(t *testing.T, conn net.Conn) error {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("a stream of a closed tunnel read: %v", err)
	}
	return err
}

// A purge that finds the peer answering keeps the tunnel: its flows go on,
// and later dials ride it.
func TestPurgeKeepsATunnelWhosePeerAnswers(t *testing.T) {
	p, c := pair(t, "", nil)
	conn := dialTCP(t, c, "echo.test:7")
	defer conn.Close()
	l := dialUDP(t, c)
	r := readLink(t, l)
	if _, got := r.exchange(t, l, mustAddr("10.7.0.1:9001"), []byte("a")); string(got) != "p0:a" {
		t.Fatalf("reply %q", got)
	}
	tun := c.tunnel()
	shook := lastHandshake(p.dev)

	c.Purge()
	if c.tunnel() != tun {
		t.Fatal("a purge replaced a tunnel whose peer answers")
	}
	if _, got := r.exchange(t, l, mustAddr("10.7.0.1:9001"), []byte("b")); string(got) != "p0:b" {
		t.Fatalf("reply %q", got)
	}
	again := dialTCP(t, c, "echo.test:7")
	echoOnce(t, again, []byte("after the purge"))
	if c.tunnel() != tun || len(c.socks.networks()) != 1 {
		t.Fatalf("after a purge: a new tunnel, %d sockets", len(c.socks.networks()))
	}
	if !lastHandshake(p.dev).Equal(shook) {
		t.Fatal("the peer saw a new handshake")
	}
	if c.logs.count("the tunnel is kept") != 1 {
		t.Fatalf("logs:\n%s", c.logs)
	}
	echoOnce(t, conn, []byte("the first stream goes on"))
}

// A purge that finds the peer silent closes the tunnel with its flows; the
// next dial starts a new one, which the peer handshakes with.
func TestPurgeClosesASilentTunnel(t *testing.T) {
	p, c := pair(t, "", nil)
	conn := dialTCP(t, c, "echo.test:7")
	defer conn.Close()
	echoOnce(t, conn, []byte("before the purge"))
	l := dialUDP(t, c)
	r := readLink(t, l)
	first := lastHandshake(p.dev)
	if first.IsZero() {
		t.Fatal("the peer saw no handshake")
	}
	// The peer answered 50 ms ago: silent, for a 20 ms limit.
	c.setSilence(20 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)

	c.Purge()
	if c.tunnel() != nil {
		t.Fatal("a silent tunnel survived the purge")
	}
	// The purge retired the flow: no failure of anyone's.
	if err := readFails(t, conn); !isRetired(err) {
		t.Fatalf("a stream of a purged tunnel: %v", err)
	}
	select {
	case got := <-r.replies:
		if !errors.Is(got.err, net.ErrClosed) {
			t.Fatalf("a link of a closed tunnel read %q, %v", got.b, got.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a link of a closed tunnel still reads")
	}
	if _, ok := c.ServerFamily(); ok {
		t.Fatal("a family with no tunnel")
	}
	if c.logs.count("wireguard: the peer answered no handshake for ") != 1 {
		t.Fatalf("logs:\n%s", c.logs)
	}

	c.setSilence(0)
	fresh := dialTCP(t, c, "echo.test:7")
	defer fresh.Close()
	echoOnce(t, fresh, []byte("through a new tunnel"))
	if n := len(c.socks.networks()); n != 2 {
		t.Fatalf("%d sockets, want 2: one per tunnel", n)
	}
	if !lastHandshake(p.dev).After(first) {
		t.Fatal("the new tunnel did not handshake with the peer")
	}
}

// A tunnel nothing ever answered is silent from its start.
func TestPurgeClosesATunnelNeverAnswered(t *testing.T) {
	c := newClient(t, clientSpec(nil, newKeyPair(t)))
	l := dialUDP(t, c)
	defer l.Close()
	c.Purge() // just started: not silent for long enough yet
	if c.tunnel() == nil {
		t.Fatal("a tunnel started a moment ago was closed")
	}
	c.setSilence(20 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	c.Purge()
	if c.tunnel() != nil {
		t.Fatal("a tunnel never answered survived the purge")
	}
	if _, _, err := l.ReadPacket(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read on a closed tunnel: %v", err)
	}
	dialUDP(t, c).Close()
	if n := len(c.socks.networks()); n != 2 {
		t.Fatalf("%d sockets, want 2", n)
	}
	c.Purge() // nothing up yet in the new one that counts: not silent
	c.Close()
	c.Purge() // after Close: nothing
}

// A tunnel kept under suspicion is rebuilt by the first dial that finds its
// peer silent for the limit.
func TestPurgeSuspectIsRebuiltOnceSilent(t *testing.T) {
	_, c := pair(t, "", nil)
	conn := dialTCP(t, c, "echo.test:7")
	defer conn.Close()
	old := c.tunnel()
	c.Purge()
	if c.tunnel() != old {
		t.Fatal("kept tunnel replaced")
	}
	c.setSilence(20 * time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	l := dialUDP(t, c)
	defer l.Close()
	if c.tunnel() == old || c.tunnel() == nil {
		t.Fatal("the dial took the suspect tunnel its peer left silent")
	}
	readFails(t, conn)
	if n := len(c.socks.networks()); n != 2 {
		t.Fatalf("%d sockets, want 2", n)
	}
}

// A handshake the peer answers after the purge clears the suspicion.
func TestPurgeSuspicionClearsOnAnAnswer(t *testing.T) {
	_, c := pair(t, "", nil)
	conn := dialTCP(t, c, "echo.test:7")
	defer conn.Close()
	old := c.tunnel()
	c.Purge()
	// As if the purge came before the tunnel's last handshake.
	c.tunnels.mu.Lock()
	if c.tunnels.suspect != old {
		c.tunnels.mu.Unlock()
		t.Fatal("no suspicion after a purge that kept the tunnel")
	}
	c.tunnels.purgedAt = old.up
	c.tunnels.silence = 20 * time.Millisecond
	c.tunnels.mu.Unlock()
	time.Sleep(50 * time.Millisecond)
	l := dialUDP(t, c)
	defer l.Close()
	c.tunnels.mu.Lock()
	cleared := c.tunnels.suspect == nil
	c.tunnels.mu.Unlock()
	if c.tunnel() != old || !cleared {
		t.Fatalf("the tunnel was replaced (%v) or is still suspect (%v)", c.tunnel() != old, !cleared)
	}
	echoOnce(t, conn, []byte("kept"))
}

// Purges race dials, both kinds: with an answering peer every dial and
// flow works; with every purge closing the tunnel nothing races or hangs.
func TestPurgeConcurrentWithDials(t *testing.T) {
	_, c := pair(t, "", nil)
	race := func(dial func() error) {
		stop := make(chan struct{})
		var purger sync.WaitGroup
		purger.Add(1)
		go func() {
			defer purger.Done()
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Millisecond):
					c.Purge()
					c.ServerFamily()
				}
			}
		}()
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 10 {
					if err := dial(); err != nil {
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
	}
	race(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := c.DialStream(ctx, netx.Flow{Dst: mustAddr("10.7.0.1:7")})
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte("x")); err != nil {
			return err
		}
		_, err = conn.Read(make([]byte, 1))
		return err
	})
	if n := len(c.socks.networks()); n != 1 {
		t.Fatalf("%d tunnels, want 1: its peer answers", n)
	}
	c.setSilence(time.Nanosecond)
	var opened atomic.Int32
	race(func() error {
		// A purge may close the tunnel under the dial, or under the link.
		l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
		if err == nil {
			l.WritePacket([]byte("x"), mustAddr("10.7.0.1:9001"))
			l.Close()
			opened.Add(1)
		}
		return nil
	})
	if opened.Load() == 0 {
		t.Fatal("no link opened while purges closed the tunnel")
	}
	c.setSilence(0)
	dialUDP(t, c).Close()
}

// ServerFamily is the family of the endpoint the current tunnel sends to;
// unknown before the first tunnel.
func TestServerFamily(t *testing.T) {
	_, c := pair(t, "", nil)
	if _, ok := c.ServerFamily(); ok {
		t.Fatal("a family before the tunnel")
	}
	dialUDP(t, c).Close()
	if f, ok := c.ServerFamily(); !ok || f != netx.V4 {
		t.Fatalf("family %v, %v; want IPv4", f, ok)
	}

	keys := newKeyPair(t)
	p6 := startPeer(t, peerOptions{client: keys.public, ipv6: true})
	o := clientSpec(p6, keys)
	o.EndpointAddressFamily = "prefer_ipv6"
	c6 := newClient(t, o)
	c6.servers.answers["peer.test"] = []netip.Addr{mustIP("127.0.0.1"), mustIP("::1")}
	conn := dialTCP(t, c6, "echo.test:7")
	defer conn.Close()
	if f, ok := c6.ServerFamily(); !ok || f != netx.V6 {
		t.Fatalf("family %v, %v; want IPv6", f, ok)
	}
	// The stream names its destination inside the tunnel.
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || !a.IP.Equal(peerV4.AsSlice()) && !a.IP.Equal(peerV6.AsSlice()) {
		t.Fatalf("stream RemoteAddr %v, want a peer address inside the tunnel", conn.RemoteAddr())
	}
}
