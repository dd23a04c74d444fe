package wireguard

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
)

// Bounds of TestCloseWhileFlowsWrite.
const (
	closeRounds  = 30
	closeBudget  = 4 * time.Second // the rounds stop early once it is spent
	closeStreams = 4
)

// Closing an outbound while its flows write: the stack emits packets from
// the writers' goroutines, from its timers and from the resets of Close
// itself, all while the device closes. Nothing may panic or race, every
// flow must end with the tunnel, and TestMain finds no goroutine left.
//
// Each round is a new client of one peer, with its own key and tunnel
// addresses. A new key handshakes at once: the peer ignores a handshake of
// a known key within 20 ms of the last or with a timestamp no later than
// its. New addresses keep what the peer still sends to an earlier client
// from reaching the next one: it would make the peer start a handshake
// crossing the client's, and the dial would stall until the client tries
// again 5 s later.
func TestCloseWhileFlowsWrite(t *testing.T) {
	// The peer's cleanup is registered first, so it runs after every
	// client's: the peer closes last.
	p := startPeer(t, peerOptions{client: newKeyPair(t).public})
	start := time.Now()
	rounds := 0
	for ; rounds < closeRounds && time.Since(start) < closeBudget; rounds++ {
		keys := newKeyPair(t)
		o := clientSpec(p, keys)
		o.Addresses = []netip.Prefix{
			netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 7, 1, byte(1 + rounds)}), 32),
			netip.PrefixFrom(netip.AddrFrom16([16]byte{0: 0xfd, 3: 7, 13: 1, 15: byte(1 + rounds)}), 128),
		}
		p.admit(t, keys.public, o.Addresses...)
		closeWhileWriting(t, newClient(t, o), time.Duration(1+rounds%5)*4*time.Millisecond)
	}
	t.Logf("%d rounds in %v", rounds, time.Since(start).Round(time.Millisecond))
}

// closeWhileWriting opens streams over both families and a UDP link, lets
// them write for a while, closes the outbound and waits for every flow to
// end.
func closeWhileWriting(t *testing.T, c *client, writeFor time.Duration) {
	t.Helper()
	var (
		wg    sync.WaitGroup
		conns []net.Conn
		stop  = make(chan struct{})
	)
	for i := range closeStreams {
		dst := "10.7.0.1:7"
		if i%2 == 1 {
			dst = "[fd00:7::1]:7"
		}
		conn := dialTCP(t, c, dst)
		conns = append(conns, conn)
		wg.Add(2)
		go func() { defer wg.Done(); io.Copy(io.Discard, conn) }()
		go func() {
			defer wg.Done()
			b := make([]byte, 16<<10)
			for {
				if _, err := conn.Write(b); err != nil {
					return
				}
			}
		}()
	}
	l, err := c.DialPacket(context.Background(), netx.Flow{Network: netx.UDP})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	wg.Add(2)
	go func() {
		defer wg.Done()
		b := make([]byte, 2048)
		for {
			if _, _, err := l.ReadPacket(b); err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("link read after Close: %v", err)
				}
				return
			}
		}
	}()
	go func() {
		defer wg.Done()
		b := make([]byte, 1200)
		to := mustAddr("10.7.0.1:9001")
		for {
			select {
			case <-stop:
				return
			default:
			}
			l.WritePacket(b, to)
		}
	}()

	time.Sleep(writeFor)
	c.Close()
	close(stop)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a flow outlived the outbound's Close")
	}
	for _, conn := range conns {
		conn.Close()
	}
}
