package fanout_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
	"switchyard/plane"
	"switchyard/route"
	"switchyard/spec"
	"switchyard/track"
)

// assocFlow is the association every test opens.
var assocFlow = netx.Flow{
	Network: netx.UDP,
	Src:     netip.MustParseAddrPort("127.0.0.1:50000"),
	Inbound: "socks-in",
	User:    "alice",
}

func target(tag string, version uint32, out interface {
	DialStream(context.Context, netx.Flow) (net.Conn, error)
	DialPacket(context.Context, netx.Flow) (netx.PacketLink, error)
}) *plane.Target {
	return plane.NewTarget(plane.OutboundID{Tag: tag, Version: version}, out)
}

// byPort routes packets to port to t.
type byPort struct {
	port uint16
	to   *plane.Target
}

func mustCompilePort(tb testing.TB, port uint16) route.Rule {
	tb.Helper()
	m, err := route.Compile(spec.Rule{Port: []uint16{port}})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func planeOf(t *testing.T, epoch uint64, final *plane.Target, rules ...byPort) *plane.Plane {
	t.Helper()
	p := &plane.Plane{Epoch: epoch, Final: final, Targets: map[string]*plane.Target{final.ID().Tag: final}}
	for _, r := range rules {
		m, err := route.Compile(spec.Rule{Port: []uint16{r.port}, Outbound: r.to.ID().Tag})
		if err != nil {
			t.Fatal(err)
		}
		p.Rules = append(p.Rules, plane.Rule{Match: m, Target: r.to})
		p.Targets[r.to.ID().Tag] = r.to
	}
	return p
}

// logs records what the fan-out logs.
type logs struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r)
	l.mu.Unlock()
	return nil
}
func (l *logs) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logs) WithGroup(string) slog.Handler      { return l }

// count returns how many debug records have exactly msg.
func (l *logs) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.Message == msg && r.Level == slog.LevelDebug {
			n++
		}
	}
	return n
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	for _, r := range l.records {
		b.WriteString(r.Level.String() + " " + r.Message + "\n")
	}
	return b.String()
}

// waitLog waits until msg was logged at debug level.
func (l *logs) waitLog(t *testing.T, msg string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.count(msg) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("never logged %q; logged:\n%s", msg, l)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// assoc is one association under test with a goroutine draining its replies.
type assoc struct {
	*fanout.Link
	cell    *plane.Cell
	tracker *track.Tracker
	logs    *logs
	replies chan datagram
	stop    chan struct{} // tells the draining goroutine to stop handing replies over
	drained chan struct{}
}

func newAssoc(t *testing.T, p *plane.Plane) *assoc {
	t.Helper()
	return newAssocOf(t, p, assocFlow)
}

// newAssocOf is newAssoc for the association flow.
func newAssocOf(t *testing.T, p *plane.Plane, flow netx.Flow) *assoc {
	t.Helper()
	a := &assoc{
		cell:    new(plane.Cell),
		tracker: track.New(),
		logs:    new(logs),
		replies: make(chan datagram, 1024),
		stop:    make(chan struct{}),
		drained: make(chan struct{}),
	}
	a.cell.Store(p)
	a.Link = fanout.New(a.cell, flow, a.tracker, slog.New(a.logs))
	go func() {
		defer close(a.drained)
		buf := make([]byte, 2048)
		for {
			n, from, err := a.ReadPacket(buf)
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Errorf("ReadPacket failed with %v before Close", err)
				}
				return
			}
			select {
			case a.replies <- datagram{payload: string(buf[:n]), from: from}:
			case <-a.stop:
				return
			}
		}
	}()
	t.Cleanup(a.close)
	return a
}

func (a *assoc) close() {
	close(a.stop)
	a.Close()
	<-a.drained
}

func (a *assoc) send(t *testing.T, payload string, to netx.Addr) {
	t.Helper()
	if err := a.WritePacket([]byte(payload), to); err != nil {
		t.Fatalf("WritePacket to %v: %v", to, err)
	}
}

// reply waits for the next reply.
func (a *assoc) reply(t *testing.T) datagram {
	t.Helper()
	select {
	case d := <-a.replies:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no reply")
		return datagram{}
	}
}

// silent asserts that no reply arrives for a while.
func (a *assoc) silent(t *testing.T) {
	t.Helper()
	select {
	case d := <-a.replies:
		t.Fatalf("unexpected reply %q from %v", d.payload, d.from)
	case <-time.After(150 * time.Millisecond):
	}
}

// flow returns the only live tracked flow on outbound id.
func (a *assoc) flow(t *testing.T, id string) track.Snapshot {
	t.Helper()
	var found []track.Snapshot
	for _, s := range a.tracker.Flows() {
		if s.Outbound == id {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d live flows on %s, want 1: %+v", len(found), id, a.tracker.Flows())
	}
	return found[0]
}

// echoServer answers every datagram with the same bytes.
type echoServer struct {
	addr     netx.Addr
	received atomic.Int32
}

func newEcho(t *testing.T) *echoServer {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{addr: netx.AddrFromAddrPort(c.LocalAddr().(*net.UDPAddr).AddrPort())}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 65535)
		for {
			n, from, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			e.received.Add(1)
			c.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	t.Cleanup(func() { c.Close(); <-done })
	return e
}
