package fanout_test

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/track"
)

// pathReports records what a fan-out tells its Reporter.
type pathReports struct {
	mu  sync.Mutex
	got []string
}

func (r *pathReports) PacketPath(node [16]byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, string(node[:1])+map[bool]string{true: "+", false: "-"}[ok])
}

func (r *pathReports) wait(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.mu.Lock()
		got := append([]string(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= len(want) {
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("reports %v, want %v", got, want)
				}
			}
			if len(got) > len(want) {
				t.Fatalf("reports %v, want %v", got, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("reports %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func nodeTarget(tag string, id byte, out *scriptedOutbound) *plane.Target {
	t := target(tag, 1, out)
	t.SetNode([16]byte{id})
	return t
}

// A leaf's first reply reports its packet path working, once per sub-link;
// an open that fails reports it failing; a sub-link closed with the
// association reports nothing.
func TestTheFanOutReportsEachLeafsPacketPath(t *testing.T) {
	good := &scriptedOutbound{replies: func(p []byte, to netx.Addr) []datagram {
		return []datagram{{payload: "re", from: to}}
	}}
	bad := &scriptedOutbound{openErr: errors.New("refused")}
	cell := new(plane.Cell)
	cell.Store(planeOf(t, 1, nodeTarget("good", 'g', good), byPort{2, nodeTarget("bad", 'b', bad)}))
	rep := &pathReports{}
	l := fanout.NewReporting(cell, assocFlow, track.New(), nil, rep)
	buf := make([]byte, 64)
	for range 3 {
		if err := l.WritePacket([]byte("hi"), netx.DomainAddr("a.example", 1)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.ReadPacket(buf); err != nil {
			t.Fatal(err)
		}
	}
	rep.wait(t, "g+")
	l.WritePacket([]byte("hi"), netx.DomainAddr("b.example", 2))
	rep.wait(t, "g+", "b-")
	l.Close()
	time.Sleep(50 * time.Millisecond)
	rep.wait(t, "g+", "b-")
}

// failingOutbound opens links whose ReadPacket fails once fail is closed.
type failingOutbound struct {
	fail   chan struct{}
	opened chan struct{}
}

func (o *failingOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("no streams")
}

func (o *failingOutbound) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	close(o.opened)
	return &failingLink{o: o, done: make(chan struct{})}, nil
}

type failingLink struct {
	o    *failingOutbound
	done chan struct{}
	once sync.Once
}

func (l *failingLink) WritePacket([]byte, netx.Addr) error { return nil }
func (l *failingLink) ReadPacket([]byte) (int, netx.Addr, error) {
	select {
	case <-l.o.fail:
		return 0, netx.Addr{}, errors.New("connection reset")
	case <-l.done:
		return 0, netx.Addr{}, net.ErrClosed
	}
}
func (l *failingLink) Close() error { l.once.Do(func() { close(l.done) }); return nil }

// A sub-link whose link fails while open reports a failure.
func TestASubLinkThatFailsReportsIt(t *testing.T) {
	out := &failingOutbound{fail: make(chan struct{}), opened: make(chan struct{})}
	tg := target("x", 1, out)
	tg.SetNode([16]byte{'x'})
	cell := new(plane.Cell)
	cell.Store(planeOf(t, 1, tg))
	rep := &pathReports{}
	l := fanout.NewReporting(cell, assocFlow, track.New(), nil, rep)
	defer l.Close()
	l.WritePacket([]byte("hi"), netx.DomainAddr("a.example", 1))
	<-out.opened
	close(out.fail)
	rep.wait(t, "x-")
}
