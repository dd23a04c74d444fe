package netx

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// goroutineID is the number runtime.Stack names the calling goroutine by.
func goroutineID() string {
	var b [64]byte
	n := runtime.Stack(b[:], false)
	f := bytes.Fields(b[:n])
	return string(f[1])
}

func newPoller(t *testing.T) *Poller {
	t.Helper()
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func rawConn(t *testing.T, c *net.UDPConn) syscall.RawConn {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// drain reads every datagram waiting on c without waiting.
func drainNow(c *net.UDPConn, buf []byte) (got []string) {
	rc, _ := c.SyscallConn()
	rc.Read(func(fd uintptr) bool {
		for {
			n, _, err := recvFrom(fd, buf)
			if err != nil {
				return true
			}
			got = append(got, string(buf[:n]))
		}
	})
	return got
}

// Many sockets are read on the poller's one goroutine, each datagram
// once, whichever socket it arrives on.
func TestPollerReadsEverySocketOnOneGoroutine(t *testing.T) {
	p := newPoller(t)
	peer := listenUDP(t, "udp4", "127.0.0.1:0")
	const socks = 8
	var (
		mu  sync.Mutex
		got = map[string]int{}
		ids = map[string]bool{}
	)
	var running atomic.Int32
	var conns []*net.UDPConn
	for range socks {
		c := listenUDP(t, "udp4", "127.0.0.1:0")
		conns = append(conns, c)
		if _, err := p.Watch(rawConn(t, c), func(buf []byte) bool {
			if running.Add(1) != 1 {
				t.Error("two watches ran at once")
			}
			defer running.Add(-1)
			ds := drainNow(c, buf)
			mu.Lock()
			ids[goroutineID()] = true
			for _, d := range ds {
				got[d]++
			}
			mu.Unlock()
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for i, c := range conns {
			sendTo(t, peer, []byte{byte('a' + i), byte('0' + round)}, addrOf(c))
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == socks*3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != socks*3 {
		t.Fatalf("received %d distinct datagrams, want %d: %v", len(got), socks*3, got)
	}
	for d, n := range got {
		if n != 1 {
			t.Errorf("%q read %d times", d, n)
		}
	}
	if len(ids) != 1 {
		t.Errorf("the watches ran on %d goroutines, want one", len(ids))
	}
}

// What a turn leaves waiting is reported again (level-triggered): a
// watch that takes one datagram a turn still gets them all.
func TestPollerReportsWhatATurnLeaves(t *testing.T) {
	p := newPoller(t)
	peer := listenUDP(t, "udp4", "127.0.0.1:0")
	c := listenUDP(t, "udp4", "127.0.0.1:0")
	rc := rawConn(t, c)
	got := make(chan string, 16)
	if _, err := p.Watch(rc, func(buf []byte) bool {
		rc.Read(func(fd uintptr) bool {
			if n, _, err := recvFrom(fd, buf); err == nil {
				got <- string(buf[:n])
			}
			return true
		})
		return true
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		sendTo(t, peer, []byte{byte('0' + i)}, addrOf(c))
	}
	for i := range 5 {
		select {
		case d := <-got:
			if d != string(rune('0'+i)) {
				t.Fatalf("datagram %d is %q", i, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("datagram %d never read", i)
		}
	}
}

// Kick runs a watch once more though nothing is readable: a closed
// socket, which epoll no longer reports, is then seen as closed.
func TestPollerKickRunsTheWatchOnceMore(t *testing.T) {
	p := newPoller(t)
	c := listenUDP(t, "udp4", "127.0.0.1:0")
	rc := rawConn(t, c)
	ended := make(chan error, 1)
	var w *Watch
	w, err := p.Watch(rc, func([]byte) bool {
		if err := rc.Read(func(uintptr) bool { return true }); err != nil {
			ended <- err
			return false
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	w.Kick()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("the watch saw %v, want a closed socket", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the kicked watch never ran")
	}
	w.Kick() // ended: nothing runs
	time.Sleep(20 * time.Millisecond)
	if len(ended) != 0 {
		t.Fatal("an ended watch ran again")
	}
}

// Stop waits for a turn in progress, and the watch does not run again.
func TestPollerStopWaitsForATurn(t *testing.T) {
	p := newPoller(t)
	peer := listenUDP(t, "udp4", "127.0.0.1:0")
	c := listenUDP(t, "udp4", "127.0.0.1:0")
	in, release := make(chan struct{}), make(chan struct{})
	var turns, after atomic.Int32
	var stopped atomic.Bool
	w, err := p.Watch(rawConn(t, c), func(buf []byte) bool {
		if stopped.Load() {
			after.Add(1)
		}
		if turns.Add(1) == 1 {
			close(in)
			<-release
		}
		drainNow(c, buf)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	sendTo(t, peer, []byte("x"), addrOf(c))
	<-in
	done := make(chan struct{})
	go func() { w.Stop(); stopped.Store(true); close(done) }()
	select {
	case <-done:
		t.Fatal("Stop returned while the watch ran")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-done
	sendTo(t, peer, []byte("y"), addrOf(c))
	w.Kick()
	time.Sleep(50 * time.Millisecond)
	if after.Load() != 0 {
		t.Fatal("a stopped watch ran")
	}
}

// After Close a kick runs the watch on the kicker's goroutine, and
// watching fails.
func TestPollerAfterClose(t *testing.T) {
	p, err := NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	c := listenUDP(t, "udp4", "127.0.0.1:0")
	var on string
	w, err := p.Watch(rawConn(t, c), func([]byte) bool { on = goroutineID(); return false })
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	w.Kick()
	if on != goroutineID() {
		t.Fatalf("the kick after Close ran on goroutine %q, want the kicker's", on)
	}
	if _, err := p.Watch(rawConn(t, c), func([]byte) bool { return true }); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Watch after Close: %v", err)
	}
}

// A closed descriptor cannot be watched.
func TestPollerRefusesAClosedSocket(t *testing.T) {
	p := newPoller(t)
	c := listenUDP(t, "udp4", "127.0.0.1:0")
	rc := rawConn(t, c)
	c.Close()
	if _, err := p.Watch(rc, func([]byte) bool { return true }); err == nil {
		t.Fatal("a closed socket was watched")
	}
}

// DualUDP's poll sources read each family's socket without waiting, say
// when nothing is waiting, and the link's close is told to the poller's
// side once, after which the reads fail as closed.
func TestDualUDPPollSources(t *testing.T) {
	var d Dialer
	u, err := d.BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var closes atomic.Int32
	srcs := u.PollSources(func() { closes.Add(1) })
	if len(srcs) == 0 || len(srcs) > 2 {
		t.Fatalf("%d sources", len(srcs))
	}
	if again := u.PollSources(func() {}); again != nil {
		t.Fatal("a second PollSources handed the sockets out again")
	}
	buf := make([]byte, 2048)
	for _, s := range srcs {
		if _, _, err := s.Read(buf); err != ErrWouldBlock {
			t.Fatalf("an empty socket: %v", err)
		}
	}
	peer4 := listenUDP(t, "udp4", "127.0.0.1:0")
	if err := u.WriteTo([]byte("out"), addrOf(peer4)); err != nil {
		t.Fatal(err)
	}
	from := u.Socket(V4).LocalAddr().(*net.UDPAddr).AddrPort()
	sendTo(t, peer4, []byte("back"), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), from.Port()))
	var got string
	deadline := time.Now().Add(5 * time.Second)
	for got == "" && time.Now().Before(deadline) {
		for _, s := range srcs {
			n, a, err := s.Read(buf)
			if err == nil {
				got = string(buf[:n])
				if ap, _ := a.AddrPort(); ap != addrOf(peer4) {
					t.Errorf("from %v, want %v", a, addrOf(peer4))
				}
			}
		}
		time.Sleep(time.Millisecond)
	}
	if got != "back" {
		t.Fatalf("read %q", got)
	}
	u.Close()
	u.Close()
	if closes.Load() != 1 {
		t.Fatalf("the close was told %d times", closes.Load())
	}
	for _, s := range srcs {
		if _, _, err := s.Read(buf); !errors.Is(err, net.ErrClosed) {
			t.Fatalf("a read after Close: %v", err)
		}
	}
}

// Once polled, a second family coming into use sets no read deadline on
// the first's socket (the wake-up of a reader of its own), which would
// fail the poller's reads.
func TestDualUDPPolledSetsNoDeadline(t *testing.T) {
	var d Dialer
	u, err := d.BindDual(context.Background(), []Family{V4, V6}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if u.Socket(V4) == nil || u.Socket(V6) == nil {
		t.Skip("needs both families")
	}
	srcs := u.PollSources(func() {})
	peer4 := listenUDP(t, "udp4", "127.0.0.1:0")
	peer6 := listenUDP(t, "udp6", "[::1]:0")
	if err := u.WriteTo([]byte("a"), addrOf(peer4)); err != nil {
		t.Fatal(err)
	}
	if err := u.WriteTo([]byte("b"), addrOf(peer6)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	for _, s := range srcs {
		if _, _, err := s.Read(buf); err != ErrWouldBlock {
			t.Fatalf("a read once both families are in use: %v", err)
		}
	}
}
