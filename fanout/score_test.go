package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/plane"
)

// scoreLog records what a fan-out does with the Score attempts its packets
// carry: "<attempt> <event>" lines, and each report's byte totals.
type scoreLog struct {
	mu     sync.Mutex
	events []string
	tx, rx map[string]int64
	fails  map[string]error
}

func newScoreLog() *scoreLog {
	return &scoreLog{tx: map[string]int64{}, rx: map[string]int64{}, fails: map[string]error{}}
}

func (s *scoreLog) add(name, ev string) {
	s.mu.Lock()
	s.events = append(s.events, name+" "+ev)
	s.mu.Unlock()
}

// of returns the events of attempt name, in order.
func (s *scoreLog) of(name string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		if len(e) > len(name) && e[:len(name)+1] == name+" " {
			out = append(out, e[len(name)+1:])
		}
	}
	return out
}

func (s *scoreLog) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.events...)
}

// waitFor waits until attempt name's events are want.
func (s *scoreLog) waitFor(t *testing.T, name string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := s.of(name)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("attempt %s: events %q, want %q (all: %q)", name, got, want, s.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (s *scoreLog) bytes(name string) (tx, rx int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tx[name], s.rx[name]
}

type fakeAttempt struct {
	log      *scoreLog
	name     string
	beginErr error
}

func (a *fakeAttempt) Begin(time.Time) (plane.Report, error) {
	if a.beginErr != nil {
		a.log.add(a.name, "refused")
		return nil, a.beginErr
	}
	a.log.add(a.name, "begin")
	return &fakeReport{log: a.log, name: a.name}, nil
}

func (a *fakeAttempt) Release(time.Time) { a.log.add(a.name, "release") }

type fakeReport struct {
	log   *scoreLog
	name  string
	ended atomic.Bool
}

func (r *fakeReport) Setup(time.Time)    { r.log.add(r.name, "setup") }
func (r *fakeReport) Response(time.Time) { r.log.add(r.name, "response") }
func (r *fakeReport) Progress(_ time.Time, tx, rx int64) {
	if r.ended.Load() {
		r.log.add(r.name, "progress after the end")
	}
	r.log.mu.Lock()
	r.log.tx[r.name] += tx
	r.log.rx[r.name] += rx
	r.log.mu.Unlock()
}
func (r *fakeReport) Settle(time.Time) { r.end("settle") }
func (r *fakeReport) Cancel(time.Time) { r.end("cancel") }
func (r *fakeReport) Fail(_ time.Time, err error) {
	r.log.mu.Lock()
	r.log.fails[r.name] = err
	r.log.mu.Unlock()
	r.end("fail")
}

func (r *fakeReport) end(ev string) {
	if r.ended.Swap(true) {
		ev = "second end: " + ev
	}
	r.log.add(r.name, ev)
}

// scoreGroup is a Score-like chooser: every selection picks leaf (nil: no
// leaf) and attaches one attempt per nested group level, named a1, a2, …
// in selection order (with a "/2" suffix for the second level).
type scoreGroup struct {
	log      *scoreLog
	levels   int
	refuse   int // the level whose Begin refuses (1-based; 0: none)
	mu       sync.Mutex
	leaf     *plane.Target
	selected int
}

func (g *scoreGroup) Choose(q *plane.Query) *plane.Target {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.selected++
	for lv := 1; lv <= max(g.levels, 1); lv++ {
		name := fmt.Sprintf("a%d", g.selected)
		if lv > 1 {
			name += fmt.Sprintf("/%d", lv)
		}
		a := &fakeAttempt{log: g.log, name: name}
		if lv == g.refuse {
			a.beginErr = errors.New("stale plan")
		}
		q.Attempts.Add(a, time.Now())
	}
	return g.leaf
}

func (g *scoreGroup) setLeaf(l *plane.Target) {
	g.mu.Lock()
	g.leaf = l
	g.mu.Unlock()
}

// scoreAssoc is an association whose final route is a Score group over
// out.
func scoreAssoc(t *testing.T, out interface {
	DialStream(context.Context, netx.Flow) (net.Conn, error)
	DialPacket(context.Context, netx.Flow) (netx.PacketLink, error)
}) (*assoc, *scoreGroup, *scoreLog) {
	t.Helper()
	log := newScoreLog()
	g := &scoreGroup{log: log, leaf: target("node", 1, out)}
	g.leaf.SetNode([16]byte{'n'})
	p := planeOf(t, 1, plane.NewChooserTarget(plane.OutboundID{Tag: "score", Version: 1}, g))
	return newAssoc(t, p), g, log
}

var scorePeer = netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.7:443"))

// A sub-link whose peer answers reports its setup, its first response,
// the bytes sent and delivered, and settles when the association ends;
// the second packet's selection, going to the same sub-link, is released.
func TestScoreReportsAReplyingSubLink(t *testing.T) {
	out := &scriptedOutbound{replies: func(p []byte, to netx.Addr) []datagram {
		return []datagram{{payload: "re:" + string(p), from: to}}
	}}
	a, _, log := scoreAssoc(t, out)
	a.send(t, "hello", scorePeer)
	a.reply(t)
	a.send(t, "again", scorePeer)
	a.reply(t)
	log.waitFor(t, "a2", "release")
	a.Close()
	log.waitFor(t, "a1", "begin", "setup", "response", "settle")
	if tx, rx := log.bytes("a1"); tx != 10 || rx != 16 {
		t.Fatalf("reported %d bytes sent and %d delivered, want 10 and 16", tx, rx)
	}
}

// A failed open fails the report with the open's error.
func TestScoreFailsAFailedOpen(t *testing.T) {
	refused := errors.New("proxy refused the association")
	a, _, log := scoreAssoc(t, &scriptedOutbound{openErr: refused})
	a.send(t, "hello", scorePeer)
	log.waitFor(t, "a1", "begin", "fail")
	if err := log.fails["a1"]; !errors.Is(err, refused) {
		t.Fatalf("failed with %v, want %v", err, refused)
	}
	// The version backs off: the next packet opens nothing and releases
	// its attempt.
	a.send(t, "hello", scorePeer)
	log.waitFor(t, "a2", "release")
}

// losingOutbound's links answer every packet until told to fail, and
// then fail their receive with the one error given (a shared source's
// loss reaching every link bound to it).
type losingOutbound struct {
	mu    sync.Mutex
	links []*losingLink
}

func (o *losingOutbound) DialStream(context.Context, netx.Flow) (net.Conn, error) {
	return nil, errors.New("no streams")
}

func (o *losingOutbound) DialPacket(context.Context, netx.Flow) (netx.PacketLink, error) {
	l := &losingLink{in: make(chan datagram, 16), dead: make(chan struct{}), closed: make(chan struct{})}
	o.mu.Lock()
	o.links = append(o.links, l)
	o.mu.Unlock()
	return l, nil
}

// fail fails every link with err.
func (o *losingOutbound) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.links {
		l.err = err
		close(l.dead)
	}
}

type losingLink struct {
	in         chan datagram
	sendErr    error
	err        error
	dead       chan struct{}
	closed     chan struct{}
	closeOnce  sync.Once
	answerless bool
}

func (l *losingLink) WritePacket(p []byte, to netx.Addr) error {
	if l.sendErr != nil {
		return l.sendErr
	}
	if !l.answerless {
		l.in <- datagram{payload: string(p), from: to}
	}
	return nil
}

func (l *losingLink) ReadPacket(p []byte) (int, netx.Addr, error) {
	select {
	case d := <-l.in:
		return copy(p, d.payload), d.from, nil
	case <-l.dead:
		return 0, netx.Addr{}, l.err
	case <-l.closed:
		return 0, netx.Addr{}, net.ErrClosed
	}
}

func (l *losingLink) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return nil
}

// A terminal receive error fails the report, after its response; a shared
// source's loss reaches every flow bound to it as the same error (one
// episode), each failing its own report.
func TestScoreFailsATerminalReceiveOfASharedSource(t *testing.T) {
	out := &losingOutbound{}
	a, _, logA := scoreAssoc(t, out)
	b, _, logB := scoreAssoc(t, out)
	a.send(t, "x", scorePeer)
	a.reply(t)
	b.send(t, "y", scorePeer)
	b.reply(t)
	lost := netx.WithEpisode(errors.New("hysteria2: the connection behind this association is gone"), netx.FaultCarrier, netx.NewEpisode())
	out.fail(lost)
	logA.waitFor(t, "a1", "begin", "setup", "response", "fail")
	logB.waitFor(t, "a1", "begin", "setup", "response", "fail")
	ea, eb := logA.fails["a1"], logB.fails["a1"]
	_, epA := netx.FaultOf(ea)
	_, epB := netx.FaultOf(eb)
	if ea != lost || eb != lost || epA == 0 || epA != epB {
		t.Fatalf("the flows failed with %v (episode %d) and %v (episode %d), want one episode", ea, epA, eb, epB)
	}
}

// A failed send fails the report.
func TestScoreFailsAFailedSend(t *testing.T) {
	broken := errors.New("sendto: network is unreachable")
	out := &scriptedOutbound{sendErr: broken}
	a, _, log := scoreAssoc(t, out)
	a.send(t, "x", scorePeer)
	log.waitFor(t, "a1", "begin", "setup", "fail")
	if !errors.Is(log.fails["a1"], broken) {
		t.Fatalf("failed with %v", log.fails["a1"])
	}
}

// No reply within the reply deadline fails the report with a timeout,
// once; the sub-link stays, and its end adds nothing.
func TestScoreFailsASubLinkThatNeverReplies(t *testing.T) {
	defer fanout.SetReplyTimeout(50 * time.Millisecond)()
	a, _, log := scoreAssoc(t, &scriptedOutbound{})
	a.send(t, "x", scorePeer)
	log.waitFor(t, "a1", "begin", "setup", "fail")
	var ne net.Error
	if err := log.fails["a1"]; !errors.Is(err, fanout.ErrNoReply) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("failed with %v, want the reply timeout", err)
	}
	a.Close()
	log.waitFor(t, "a1", "begin", "setup", "fail")
}

// Silence after a reply is no failure: the report settles when the
// sub-link ends.
func TestScoreSettlesAnIdleSubLinkAfterAReply(t *testing.T) {
	defer fanout.SetReplyTimeout(30 * time.Millisecond)()
	out := &scriptedOutbound{replies: func(p []byte, to netx.Addr) []datagram {
		return []datagram{{payload: "re", from: to}}
	}}
	a, _, log := scoreAssoc(t, out)
	a.send(t, "x", scorePeer)
	a.reply(t)
	time.Sleep(100 * time.Millisecond)
	a.Close()
	log.waitFor(t, "a1", "begin", "setup", "response", "settle")
}

// A sub-link closed on purpose without a reply (the association's end,
// an open abandoned) cancels its report.
func TestScoreCancelsARetiredSubLinkWithoutAReply(t *testing.T) {
	a, _, log := scoreAssoc(t, &scriptedOutbound{})
	a.send(t, "x", scorePeer)
	log.waitFor(t, "a1", "begin", "setup")
	a.Close()
	log.waitFor(t, "a1", "begin", "setup", "cancel")

	silent := newSilent()
	b, _, logB := scoreAssoc(t, silent)
	b.send(t, "x", scorePeer)
	logB.waitFor(t, "a1", "begin")
	b.Close()
	logB.waitFor(t, "a1", "begin", "cancel")
}

// A Begin that refuses (a stale plan) refuses the sub-link: nothing is
// dialed, the begun outer attempt is cancelled and the rest released, and
// the next packet is selected again.
func TestScoreRefusedBeginOpensNothing(t *testing.T) {
	out := &scriptedOutbound{}
	a, g, log := scoreAssoc(t, out)
	g.levels, g.refuse = 3, 2
	a.send(t, "x", scorePeer)
	log.waitFor(t, "a1", "begin", "cancel")
	log.waitFor(t, "a1/2", "refused")
	log.waitFor(t, "a1/3", "release")
	a.Settle()
	if n := out.dials.Load(); n != 0 {
		t.Fatalf("%d dials for a refused plan", n)
	}
	g.refuse = 0
	a.send(t, "x", scorePeer)
	log.waitFor(t, "a2", "begin", "setup")
}

// A selection that resolves to no leaf opens nothing and releases its
// attempts.
func TestScoreReleasesASelectionWithoutALeaf(t *testing.T) {
	a, g, log := scoreAssoc(t, &scriptedOutbound{})
	g.setLeaf(nil)
	g.levels = 2
	a.send(t, "x", scorePeer)
	log.waitFor(t, "a1", "release")
	log.waitFor(t, "a1/2", "release")
}

// Packets queued on a sub-link still opening release their attempts; the
// one that opened it reports once.
func TestScoreOneReportPerSubLink(t *testing.T) {
	out := &scriptedOutbound{gate: make(chan struct{}), replies: func(p []byte, to netx.Addr) []datagram {
		return []datagram{{payload: "re", from: to}}
	}}
	a, _, log := scoreAssoc(t, out)
	for range 3 {
		a.send(t, "x", scorePeer)
	}
	log.waitFor(t, "a2", "release")
	log.waitFor(t, "a3", "release")
	close(out.gate)
	for range 3 {
		a.reply(t)
	}
	a.Close()
	log.waitFor(t, "a1", "begin", "setup", "response", "settle")
	if tx, rx := log.bytes("a1"); tx != 3 || rx != 6 {
		t.Fatalf("reported %d bytes sent and %d delivered, want 3 and 6", tx, rx)
	}
}

// Packets of a route without Score attempts cost nothing extra: routing,
// claiming and sending one allocates nothing.
func TestUnscoredPacketsAllocateNothing(t *testing.T) {
	out := &scriptedOutbound{forget: true}
	a := newAssoc(t, planeOf(t, 1, target("plain", 1, out)))
	a.send(t, "x", scorePeer)
	a.Settle()
	p := []byte("payload")
	if n := testing.AllocsPerRun(200, func() { a.WritePacket(p, scorePeer) }); n != 0 {
		t.Fatalf("%v allocations per packet", n)
	}
}

// Over real sockets: a peer that echoes makes the report respond and
// settle; a peer that never answers (a closed port swallowed by a blocked
// route) fails it with the reply timeout, and the association goes on.
func TestScoreOverRealSockets(t *testing.T) {
	defer fanout.SetReplyTimeout(200 * time.Millisecond)()
	echo := newEcho(t)
	a, g, log := scoreAssoc(t, &udpOutbound{})
	a.send(t, "ping", echo.addr)
	if d := a.reply(t); d.payload != "ping" {
		t.Fatalf("reply %q", d.payload)
	}
	g.setLeaf(target("silent", 1, &udpOutbound{}))
	hole, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer hole.Close() // receives, never answers
	a.send(t, "ping", netx.AddrFromAddrPort(hole.LocalAddr().(*net.UDPAddr).AddrPort()))
	log.waitFor(t, "a2", "begin", "setup", "fail")
	a.Close()
	log.waitFor(t, "a1", "begin", "setup", "response", "settle")
	if tx, rx := log.bytes("a1"); tx != 4 || rx != 4 {
		t.Fatalf("a1 reported %d bytes sent and %d delivered", tx, rx)
	}
}
