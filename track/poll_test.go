package track_test

import (
	"errors"
	"testing"

	"switchyard/netx"
	"switchyard/track"
)

// pollSink is a sinkLink a Poller could read: its one source takes what
// was delivered without waiting.
type pollSink struct {
	*sinkLink
	closed func()
}

func (s *pollSink) PollSources(closed func()) []netx.PollSource {
	s.closed = closed
	return []netx.PollSource{{Read: func(p []byte) (int, netx.Addr, error) {
		select {
		case b := <-s.in:
			return copy(p, b), netx.DomainAddr("peer.example", 53), nil
		case <-s.done:
			return 0, netx.Addr{}, errSinkClosed
		default:
			return 0, netx.Addr{}, netx.ErrWouldBlock
		}
	}}}
}

// A polled read counts its payload Down as ReadPacket does, passes "none
// waiting" on, and fails once the link is killed.
func TestPolledReadsAreCounted(t *testing.T) {
	tr := track.New()
	inner := &pollSink{sinkLink: newSinkLink()}
	l := tr.Link(tcpMeta(), inner)
	defer l.Close()
	srcs := netx.PollSourcesOf(l, func() {})
	if len(srcs) != 1 || inner.closed == nil {
		t.Fatalf("%d sources; the close hook reached the inner link: %v", len(srcs), inner.closed != nil)
	}
	buf := make([]byte, 64)
	if _, _, err := srcs[0].Read(buf); err != netx.ErrWouldBlock {
		t.Fatalf("nothing waiting: %v", err)
	}
	inner.deliver(make([]byte, 9))
	if n, _, err := srcs[0].Read(buf); n != 9 || err != nil {
		t.Fatalf("read %d: %v", n, err)
	}
	if s, _ := tr.Lookup(l.ID()); s.Down != 9 {
		t.Fatalf("down %d, want 9", s.Down)
	}
	tr.Kill(l.ID())
	inner.deliver(make([]byte, 3))
	if _, _, err := srcs[0].Read(buf); !errors.Is(err, track.ErrKilled) {
		t.Fatalf("a read after Kill: %v", err)
	}
}

// A sub-link of a user with rates has no poll sources: its reads wait
// their turn, which a poller's cannot.
func TestAPacedLinkIsNotPolled(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "slow", DownMbps: 1}})
	s := tr.OpenSession(sessionInfo("slow", true))
	defer s.End()
	inner := &pollSink{sinkLink: newSinkLink()}
	l := tr.Link(metaOf(s, netx.UDP), inner)
	defer l.Close()
	if srcs := netx.PollSourcesOf(l, func() {}); srcs != nil || inner.closed != nil {
		t.Fatalf("a paced link handed out %d poll sources", len(srcs))
	}
}
