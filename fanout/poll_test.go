package fanout_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// pollOutbound's links are dualOutbound's that a Poller can read
// (netx.PollableLink), as the direct outbound's are.
type pollOutbound struct{ dualOutbound }

func (o pollOutbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	l, err := o.dualOutbound.DialPacket(ctx, f)
	if err != nil {
		return nil, err
	}
	return pollLink{l.(dualLink)}, nil
}

type pollLink struct{ dualLink }

func (l pollLink) PollSources(closed func()) []netx.PollSource { return l.u.PollSources(closed) }

// subLinkReaders counts the goroutines reading a sub-link of their own.
func subLinkReaders() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "fanout.(*Link).read(")
}

func newPoller(t *testing.T) *netx.Poller {
	t.Helper()
	p, err := netx.NewPoller()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// A fan-out driven by a Poller has no reader goroutine for a sub-link
// the poller can read: the replies reach the batch from the poller, a
// burst as one run, and the link closes cleanly. A sub-link it cannot
// read keeps its goroutine.
func TestDriveWithReadsSubLinksOnThePoller(t *testing.T) {
	for _, c := range []struct {
		name    string
		out     interface{ pollable() bool }
		readers int
	}{
		{"pollable", pollOut{}, 0},
		{"not pollable", dualOut{}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newPoller(t)
			peer, sent := burstPeer(t, 5)
			cell := new(plane.Cell)
			var tgt *plane.Target
			if c.out.pollable() {
				tgt = target("direct", 1, pollOutbound{})
			} else {
				tgt = target("direct", 1, dualOutbound{})
			}
			cell.Store(planeOf(t, 1, tgt))
			before := subLinkReaders()
			l := fanout.New(cell, assocFlow, track.New(), nil)
			b := &recordingBatch{gate: make(chan struct{}), flushed: make(chan []string, 8)}
			close(b.gate)
			l.PushBatches(func() netx.PacketBatch { return b })
			l.DriveWith(p)
			if err := l.WritePacket([]byte("go"), peer); err != nil {
				t.Fatal(err)
			}
			<-sent
			var got []string
			for n := 0; n < 5; {
				run := b.next(t)
				got = append(got, run...)
				n += len(run)
			}
			if strings.Join(got, "") != "01234" {
				t.Fatalf("replies %q", got)
			}
			if n := subLinkReaders() - before; n != c.readers {
				t.Fatalf("%d sub-link reader goroutines, want %d", n, c.readers)
			}
			closeWithin(t, l)
		})
	}
}

type pollOut struct{}

func (pollOut) pollable() bool { return true }

type dualOut struct{}

func (dualOut) pollable() bool { return false }

// closeWithin fails the test when l.Close does not return soon.
func closeWithin(t *testing.T, l *fanout.Link) {
	t.Helper()
	done := make(chan struct{})
	go func() { l.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs")
	}
}

// Close may run on the poller's own goroutine (an inbound evicting an
// association as it reads), and after the poller closed: neither waits
// for the poller.
func TestDrivenCloseOnThePollerAndAfterIt(t *testing.T) {
	echo := newEcho(t)
	open := func(t *testing.T, p *netx.Poller) *fanout.Link {
		cell := new(plane.Cell)
		cell.Store(planeOf(t, 1, target("direct", 1, pollOutbound{})))
		l := fanout.New(cell, assocFlow, track.New(), nil)
		replied := make(chan struct{}, 1)
		l.PushPackets(func([]byte, netx.Addr) {
			select {
			case replied <- struct{}{}:
			default:
			}
		})
		l.DriveWith(p)
		if err := l.WritePacket([]byte("x"), echo.addr); err != nil {
			t.Fatal(err)
		}
		select {
		case <-replied:
		case <-time.After(5 * time.Second):
			t.Fatal("no reply")
		}
		return l
	}
	t.Run("on the poller", func(t *testing.T) {
		p := newPoller(t)
		l := open(t, p)
		c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		rc, _ := c.SyscallConn()
		closed := make(chan struct{})
		if _, err := p.Watch(rc, func([]byte) bool {
			l.Close()
			close(closed)
			return false
		}); err != nil {
			t.Fatal(err)
		}
		c.WriteToUDPAddrPort([]byte("wake"), c.LocalAddr().(*net.UDPAddr).AddrPort())
		select {
		case <-closed:
		case <-time.After(5 * time.Second):
			t.Fatal("Close on the poller's goroutine hangs")
		}
	})
	t.Run("after the poller", func(t *testing.T) {
		p := newPoller(t)
		l := open(t, p)
		p.Close()
		closeWithin(t, l)
	})
}

// A sub-link closed by something else than the fan-out (a reload's
// drain closes the version's links) ends on the poller as its reader
// would: the next datagram opens a new one, and the link closes cleanly.
func TestDrivenSubLinkClosedFromOutside(t *testing.T) {
	echo := newEcho(t)
	p := newPoller(t)
	var (
		mu    sync.Mutex
		links []netx.PacketLink
	)
	out := recordingOut{pollOutbound{}, &mu, &links}
	cell := new(plane.Cell)
	cell.Store(planeOf(t, 1, target("direct", 1, out)))
	l := fanout.New(cell, assocFlow, track.New(), nil)
	replies := make(chan string, 8)
	l.PushPackets(func(b []byte, _ netx.Addr) { replies <- string(b) })
	l.DriveWith(p)
	reply := func(want string) {
		t.Helper()
		select {
		case got := <-replies:
			if got != want {
				t.Fatalf("reply %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no reply %q", want)
		}
	}
	if err := l.WritePacket([]byte("a"), echo.addr); err != nil {
		t.Fatal(err)
	}
	reply("a")
	mu.Lock()
	links[0].Close()
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if err := l.WritePacket([]byte("b"), echo.addr); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		n := len(links)
		mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	n := len(links)
	mu.Unlock()
	if n != 2 {
		t.Fatalf("%d sub-links opened, want a second after the first closed", n)
	}
	reply("b")
	closeWithin(t, l)
}

// recordingOut records the links it opens.
type recordingOut struct {
	pollOutbound
	mu    *sync.Mutex
	links *[]netx.PacketLink
}

func (o recordingOut) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	l, err := o.pollOutbound.DialPacket(ctx, f)
	if err == nil {
		o.mu.Lock()
		*o.links = append(*o.links, l)
		o.mu.Unlock()
	}
	return l, err
}
