package track_test

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/track"
)

func sessionInfo(user string, charge bool) track.SessionInfo {
	return track.SessionInfo{
		User: user, Inbound: "socks-in", Source: netip.MustParseAddrPort("127.0.0.1:40000"),
		ChargeDatagrams: charge,
	}
}

func metaOf(s *track.Session, network netx.Network) track.Meta {
	m := tcpMeta()
	m.Network = network
	m.Session = s.ID()
	return m
}

func TestFlowsAreFiledUnderTheirSession(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "alice"}})
	s := tr.OpenSession(sessionInfo("alice", true))
	c := tr.Conn(metaOf(s, netx.TCP), &countConn{})
	c.Write(make([]byte, 5))
	c.ObserveWrite(6)
	c.Read(make([]byte, 7))
	c.ObserveRead(8)

	f, ok := tr.Lookup(c.ID())
	if !ok || f.Session != s.ID() || s.ID() == 0 {
		t.Fatalf("flow %+v (ok %v) is not filed under session %d", f, ok, s.ID())
	}
	got := tr.Sessions()
	if len(got) != 1 {
		t.Fatalf("%d sessions, want 1", len(got))
	}
	if g := got[0]; g.ID != s.ID() || g.User != "alice" || g.Inbound != "socks-in" || g.Up != 11 || g.Down != 15 || g.Flows != 1 || g.Start.IsZero() {
		t.Fatalf("session %+v, want alice's with up 11, down 15 and one flow", g)
	}
	c.Close()
	if g, _ := tr.Session(s.ID()); g.Flows != 0 || g.Up != 11 {
		t.Fatalf("after the flow closed: %+v", g)
	}
	s.End()
	s.End()
	if n := len(tr.Sessions()); n != 0 {
		t.Fatalf("%d sessions after End, want 0", n)
	}
	// A flow naming an ended or unknown session is filed under none.
	late := tr.Conn(metaOf(s, netx.TCP), &countConn{})
	defer late.Close()
	if f, _ := tr.Lookup(late.ID()); f.Session != 0 {
		t.Fatalf("a flow of an ended session is filed under %d", f.Session)
	}
	var none *track.Session
	none.End()
	if none.ID() != 0 {
		t.Fatal("a nil session has an id")
	}
}

func TestUserTotalsOutliveFlowsAndSessions(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "alice"}, {Name: "bob"}})
	for _, n := range []int{100, 1000} {
		s := tr.OpenSession(sessionInfo("alice", true))
		for range 2 {
			c := tr.Conn(metaOf(s, netx.TCP), &countConn{})
			c.Write(make([]byte, n))
			c.Read(make([]byte, 2*n))
			c.Close()
		}
		s.End()
	}
	live := tr.OpenSession(sessionInfo("alice", true))
	defer live.End()
	want := track.UserSnapshot{Name: "alice", Up: 2200, Down: 4400, Sessions: 1}
	if u, ok := tr.User("alice"); !ok || u != want {
		t.Fatalf("alice %+v, want %+v", u, want)
	}
	// A reload keeps the totals of users still configured and drops the
	// others; the table holds exactly the configured users.
	tr.SetUsers([]track.UserConfig{{Name: "alice", UpMbps: 3}, {Name: "carol"}})
	us := tr.Users()
	if len(us) != 2 || us[0].Name != "alice" || us[0].Up != 2200 || us[0].UpMbps != 3 || us[1].Name != "carol" || us[1].Up != 0 {
		t.Fatalf("users after a reload: %+v", us)
	}
	if _, ok := tr.User("bob"); ok {
		t.Fatal("a user no longer configured is still listed")
	}
}

// A UDP sub-link's payload counts toward its session only when the session
// charges datagrams; it is a flow of the session either way.
func TestDatagramsCountTowardAChargingSessionOnly(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "alice"}})
	for _, charge := range []bool{true, false} {
		s := tr.OpenSession(sessionInfo("alice", charge))
		inner := newSinkLink()
		l := tr.Link(metaOf(s, netx.UDP), inner)
		l.WritePacket(make([]byte, 10), netx.DomainAddr("peer.example", 53))
		inner.deliver(make([]byte, 4))
		l.ReadPacket(make([]byte, 64))
		f, _ := tr.Lookup(l.ID())
		g, _ := tr.Session(s.ID())
		if f.Session != s.ID() || g.Flows != 1 || f.Up != 10 || f.Down != 4 {
			t.Fatalf("charge %v: flow %+v session %+v", charge, f, g)
		}
		wantUp, wantDown := int64(0), int64(0)
		if charge {
			wantUp, wantDown = 10, 4
		}
		if g.Up != wantUp || g.Down != wantDown {
			t.Fatalf("charge %v: session wire up %d down %d, want %d and %d", charge, g.Up, g.Down, wantUp, wantDown)
		}
		l.Close()
		s.End()
	}
	if u, _ := tr.User("alice"); u.Up != 10 || u.Down != 4 {
		t.Fatalf("alice's totals %+v, want the charged datagrams only", u)
	}
}

// rate is 1 Mbps in bytes per second.
const rate = 125_000

// moved runs each of fns in a loop on its own goroutine for window and
// returns how many bytes they reported moving in total.
func moved(window time.Duration, fns ...func() int) int64 {
	var total atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	for _, fn := range fns {
		wg.Go(func() {
			for !stop.Load() {
				n := fn()
				if n <= 0 {
					return
				}
				total.Add(int64(n))
			}
		})
	}
	time.Sleep(window)
	stop.Store(true)
	wg.Wait()
	return total.Load()
}

// Two flows of a user paced at 1 Mbps share the rate, in both directions;
// another user's flow is not held back.
func TestPacingIsSharedByAUsersFlows(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "slow", UpMbps: 1, DownMbps: 1}, {Name: "fast"}})
	slow := tr.OpenSession(sessionInfo("slow", true))
	defer slow.End()
	fast := tr.OpenSession(sessionInfo("fast", true))
	defer fast.End()
	a := tr.Conn(metaOf(slow, netx.TCP), &countConn{})
	defer a.Close()
	b := tr.Conn(metaOf(slow, netx.TCP), &countConn{})
	defer b.Close()
	f := tr.Conn(metaOf(fast, netx.TCP), &countConn{})
	defer f.Close()

	const window = 1500 * time.Millisecond
	limit := int64(1.5*rate*window.Seconds()) + 4*64<<10
	buf := func() []byte { return make([]byte, 32<<10) }
	read := func(c *track.Conn) func() int {
		p := buf()
		return func() int { n, _ := c.Read(p); return n }
	}
	write := func(c *track.Conn) func() int {
		p := buf()
		return func() int { n, _ := c.Write(p); return n }
	}
	var fastDown int64
	var slowDown, slowUp int64
	var wg sync.WaitGroup
	wg.Go(func() { fastDown = moved(window, read(f)) })
	wg.Go(func() { slowDown = moved(window, read(a), read(b)) })
	wg.Go(func() { slowUp = moved(window, write(a), write(b)) })
	wg.Wait()
	for _, d := range []struct {
		what string
		n    int64
	}{{"download", slowDown}, {"upload", slowUp}} {
		if d.n > limit || d.n < rate/2 {
			t.Errorf("two 1 Mbps flows moved %d bytes of %s in %v, want between %d and %d", d.n, d.what, window, rate/2, limit)
		}
	}
	if fastDown < 20*limit {
		t.Errorf("an unpaced user's flow moved only %d bytes in %v", fastDown, window)
	}
	if u, _ := tr.User("slow"); u.Down != slowDown || u.Up != slowUp {
		t.Errorf("slow's totals %+v, want down %d up %d", u, slowDown, slowUp)
	}
}

// A datagram of a paced user waits its turn: a sub-link sends at most the
// rate.
func TestPacingHoldsASubLinksDatagrams(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "slow", UpMbps: 1}})
	s := tr.OpenSession(sessionInfo("slow", true))
	defer s.End()
	l := tr.Link(metaOf(s, netx.UDP), newSinkLink())
	defer l.Close()
	const window = 1500 * time.Millisecond
	p := make([]byte, 1200)
	to := netx.DomainAddr("peer.example", 53)
	n := moved(window, func() int {
		if l.WritePacket(p, to) != nil {
			return 0
		}
		return len(p)
	})
	if limit := int64(1.5*rate*window.Seconds()) + 64<<10; n > limit || n < rate/2 {
		t.Fatalf("a 1 Mbps sub-link sent %d bytes in %v, want between %d and %d", n, window, rate/2, limit)
	}
}

// SetUsers changes the rate of flows already running.
func TestARateChangeReachesLiveFlows(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "u", DownMbps: 1}})
	s := tr.OpenSession(sessionInfo("u", true))
	defer s.End()
	c := tr.Conn(metaOf(s, netx.TCP), &countConn{})
	defer c.Close()
	p := make([]byte, 32<<10)
	read := func() int { n, _ := c.Read(p); return n }
	const window = time.Second
	limit := int64(1.5*rate*window.Seconds()) + 64<<10
	if n := moved(window, read); n > limit {
		t.Fatalf("paced at 1 Mbps: %d bytes in %v", n, window)
	}
	tr.SetUsers([]track.UserConfig{{Name: "u", DownMbps: 0}})
	if n := moved(window, read); n < 20*limit {
		t.Fatalf("unpaced by a reload: only %d bytes in %v", n, window)
	}
	tr.SetUsers([]track.UserConfig{{Name: "u", DownMbps: 1}})
	if n := moved(window, read); n > limit {
		t.Fatalf("paced again: %d bytes in %v", n, window)
	}
}

// A flow waiting out a pause ends at once when it is closed or killed.
func TestAPauseEndsWithItsFlow(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "u", UpMbps: 1}})
	s := tr.OpenSession(sessionInfo("u", true))
	defer s.End()
	for _, kill := range []bool{false, true} {
		c := tr.Conn(metaOf(s, netx.TCP), &countConn{})
		done := make(chan error, 1)
		go func() {
			_, err := c.Write(make([]byte, 4<<20)) // a pause of half a minute
			done <- err
		}()
		time.Sleep(50 * time.Millisecond)
		if kill {
			tr.Kill(c.ID())
		} else {
			c.Close()
		}
		want := net.ErrClosed
		if kill {
			want = track.ErrKilled
		}
		select {
		case err := <-done:
			if !errors.Is(err, want) {
				t.Fatalf("kill %v: the paused write returned %v, want %v", kill, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("kill %v: the paused write did not end", kill)
		}
		// A relay splicing beneath the wrapper is released the same way.
		if err := c.Pace(false, 4<<20); !errors.Is(err, want) {
			t.Fatalf("kill %v: Pace on an ended flow returned %v", kill, err)
		}
	}
}

// Counting and pacing a session's flow allocate nothing per read or write,
// paused or not.
func TestSessionFlowsAllocateNothingPerByte(t *testing.T) {
	tr := track.New()
	tr.SetUsers([]track.UserConfig{{Name: "free"}, {Name: "paced", UpMbps: 100, DownMbps: 100}})
	for _, name := range []string{"free", "paced"} {
		s := tr.OpenSession(sessionInfo(name, true))
		c := tr.Conn(metaOf(s, netx.TCP), &countConn{})
		p := make([]byte, 8<<10)
		if n := testing.AllocsPerRun(200, func() { c.Write(p); c.Read(p) }); n != 0 {
			t.Errorf("%s: %v allocations per write and read", name, n)
		}
		l := tr.Link(metaOf(s, netx.UDP), newSinkLink())
		to := netx.DomainAddr("peer.example", 53)
		if n := testing.AllocsPerRun(200, func() { l.WritePacket(p[:1200], to) }); n != 0 {
			t.Errorf("%s: %v allocations per datagram", name, n)
		}
		l.Close()
		c.Close()
		s.End()
	}
}
