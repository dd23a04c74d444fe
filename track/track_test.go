package track_test

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/track"
)

func tcpMeta() track.Meta {
	return track.Meta{
		Network:     netx.TCP,
		Inbound:     "socks-in",
		User:        "alice",
		Source:      netip.MustParseAddrPort("127.0.0.1:40000"),
		Destination: netx.DomainAddr("example.com", 443),
		Sniffed:     "example.com",
		Rule:        "rule 3",
		Chain:       []string{"select", "auto", "proxy"},
		Outbound:    "proxy@v2",
		Epoch:       7,
	}
}

func TestConnCountsUpOnWriteAndDownOnRead(t *testing.T) {
	tr := track.New()
	c := tr.Conn(tcpMeta(), &countConn{})
	defer c.Close()
	if _, err := c.Write(make([]byte, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 7)); err != nil {
		t.Fatal(err)
	}
	s, ok := tr.Lookup(c.ID())
	if !ok {
		t.Fatal("the flow is not in the table")
	}
	if s.Up != 11 || s.Down != 7 {
		t.Fatalf("up %d down %d, want 11 and 7", s.Up, s.Down)
	}
	if !reflect.DeepEqual(s.Meta, tcpMeta()) {
		t.Fatalf("meta %+v, want %+v", s.Meta, tcpMeta())
	}
	if s.Start.IsZero() || time.Since(s.Start) > time.Minute {
		t.Fatalf("start %v is not the registration time", s.Start)
	}
}

func TestIDsStartAtOneAndFlowsAreOrdered(t *testing.T) {
	tr := track.New()
	var conns []*track.Conn
	for range 4 {
		conns = append(conns, tr.Conn(tcpMeta(), &countConn{}))
	}
	for i, c := range conns {
		if c.ID() != uint64(i+1) {
			t.Fatalf("flow %d has id %d", i, c.ID())
		}
	}
	conns[1].Close()
	var ids []uint64
	for _, s := range tr.Flows() {
		ids = append(ids, s.ID)
	}
	if len(ids) != 3 || ids[0] != 1 || ids[1] != 3 || ids[2] != 4 {
		t.Fatalf("live ids %v, want [1 3 4]", ids)
	}
	if _, ok := tr.Lookup(2); ok {
		t.Fatal("a closed flow is still looked up")
	}
	for _, c := range conns {
		c.Close()
	}
	if n := len(tr.Flows()); n != 0 {
		t.Fatalf("%d flows left after closing all", n)
	}
	if next := tr.Conn(tcpMeta(), &countConn{}); next.ID() != 5 {
		t.Fatalf("an id was reused: %d", next.ID())
	} else {
		next.Close()
	}
}

func TestConnCloseIsIdempotent(t *testing.T) {
	tr := track.New()
	inner := &countConn{}
	c := tr.Conn(tcpMeta(), inner)
	for range 3 {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := inner.closes.Load(); n != 1 {
		t.Fatalf("inner conn closed %d times", n)
	}
	if len(tr.Flows()) != 0 {
		t.Fatal("a closed flow stays in the table")
	}
}

// A relay that splices beneath the wrapper reports the bytes it moved.
func TestConnIsObservedSoARelayCanBypassIt(t *testing.T) {
	tr := track.New()
	inner := &countConn{}
	c := tr.Conn(tcpMeta(), inner)
	defer c.Close()
	raw, layers := netx.Unwrap(c, true)
	if raw != net.Conn(inner) || len(layers) != 1 || layers[0] != netx.Observed(c) {
		t.Fatalf("Unwrap gave %T and %d layers", raw, len(layers))
	}
	c.ObserveWrite(3 << 20)
	c.ObserveRead(1 << 20)
	s, _ := tr.Lookup(c.ID())
	if s.Up != 3<<20 || s.Down != 1<<20 {
		t.Fatalf("up %d down %d after observing", s.Up, s.Down)
	}
}

func TestConnCloseWriteHalfClosesTheInnerConn(t *testing.T) {
	client, server := tcpPair(t)
	tr := track.New()
	c := tr.Conn(tcpMeta(), client)
	defer c.Close()
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(server); err != nil || len(b) != 0 {
		t.Fatalf("the peer read %q, %v; want EOF", b, err)
	}
	if _, err := server.Write([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := c.Read(buf)
	if err != nil || string(buf[:n]) != "still here" {
		t.Fatalf("read %q, %v after half-close", buf[:n], err)
	}
	if s, _ := tr.Lookup(c.ID()); s.Down != 10 {
		t.Fatalf("down %d, want 10", s.Down)
	}

	p1, p2 := net.Pipe()
	defer p2.Close()
	pc := tr.Conn(tcpMeta(), p1)
	defer pc.Close()
	if err := pc.CloseWrite(); err == nil {
		t.Fatal("CloseWrite succeeded on a conn that cannot half-close")
	}
}

func TestKillEndsAConn(t *testing.T) {
	client, server := tcpPair(t)
	defer server.Close()
	tr := track.New()
	c := tr.Conn(tcpMeta(), client)
	defer c.Close()
	readErr := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 8))
		readErr <- err
	}()
	if !tr.Kill(c.ID()) {
		t.Fatal("Kill did not find the flow")
	}
	if err := <-readErr; !errors.Is(err, track.ErrKilled) {
		t.Fatalf("a blocked read returned %v, want ErrKilled", err)
	}
	if _, err := c.Write([]byte("x")); !errors.Is(err, track.ErrKilled) {
		t.Fatalf("a write returned %v, want ErrKilled", err)
	}
	if len(tr.Flows()) != 0 {
		t.Fatal("a killed flow stays in the table")
	}
	if tr.Kill(c.ID()) {
		t.Fatal("a second Kill found the flow")
	}
	if tr.Kill(999) {
		t.Fatal("Kill found an unknown id")
	}
}

func TestLinkCountsPayloadBothWays(t *testing.T) {
	tr := track.New()
	inner := newSinkLink()
	meta := tcpMeta()
	meta.Network = netx.UDP
	l := tr.Link(meta, inner)
	defer l.Close()
	to := netx.DomainAddr("peer.example", 53)
	for _, n := range []int{5, 7} {
		if err := l.WritePacket(make([]byte, n), to); err != nil {
			t.Fatal(err)
		}
	}
	inner.deliver(make([]byte, 9))
	n, from, err := l.ReadPacket(make([]byte, 64))
	if err != nil || n != 9 || from != to {
		t.Fatalf("read %d from %v: %v", n, from, err)
	}
	inner.failWrite = errors.New("no route")
	if err := l.WritePacket(make([]byte, 100), to); err == nil {
		t.Fatal("a failed send did not fail")
	}
	s, ok := tr.Lookup(l.ID())
	if !ok || s.Up != 12 || s.Down != 9 {
		t.Fatalf("up %d down %d (ok %v), want 12 and 9: a failed send counts nothing", s.Up, s.Down, ok)
	}
	if s.Network != netx.UDP {
		t.Fatalf("network %v", s.Network)
	}
}

// A killed link fails its reads and writes even when the link beneath would
// swallow writes for ever, so its owner drops it.
func TestKillFailsALinksReadAndWrite(t *testing.T) {
	tr := track.New()
	inner := newSinkLink()
	l := tr.Link(tcpMeta(), inner)
	readErr := make(chan error, 1)
	go func() {
		_, _, err := l.ReadPacket(make([]byte, 64))
		readErr <- err
	}()
	if !tr.Kill(l.ID()) {
		t.Fatal("Kill did not find the link")
	}
	if err := <-readErr; !errors.Is(err, track.ErrKilled) {
		t.Fatalf("a blocked read returned %v, want ErrKilled", err)
	}
	if err := l.WritePacket([]byte("x"), netx.DomainAddr("a", 1)); !errors.Is(err, track.ErrKilled) {
		t.Fatalf("a write returned %v, want ErrKilled", err)
	}
	if len(tr.Flows()) != 0 {
		t.Fatal("a killed link stays in the table")
	}
	l.Close()
	l.Close()
	if n := inner.closes.Load(); n != 1 {
		t.Fatalf("inner link closed %d times", n)
	}
}

func TestClosedLinkFailsWrites(t *testing.T) {
	tr := track.New()
	l := tr.Link(tcpMeta(), newSinkLink())
	l.Close()
	if err := l.WritePacket([]byte("x"), netx.DomainAddr("a", 1)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a write after Close returned %v, want net.ErrClosed", err)
	}
}

func TestCountersAreExactUnderConcurrency(t *testing.T) {
	tr := track.New()
	c := tr.Conn(tcpMeta(), &countConn{})
	defer c.Close()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			b := make([]byte, 3)
			for range 1000 {
				c.Write(b)
				c.Read(b[:1])
				c.ObserveWrite(2)
			}
		})
	}
	wg.Wait()
	s, _ := tr.Lookup(c.ID())
	if s.Up != 8*1000*5 || s.Down != 8*1000 {
		t.Fatalf("up %d down %d", s.Up, s.Down)
	}
}

func tcpPair(t *testing.T) (client, server *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c.(*net.TCPConn), s.(*net.TCPConn)
}

// A run sent in one go on a link beneath that takes runs counts what it
// sent: the datagrams after the one a send failed on count nothing.
func TestLinkCountsARunSentInOneGo(t *testing.T) {
	tr := track.New()
	inner := &batchSink{sinkLink: newSinkLink(), sendable: 4}
	meta := tcpMeta()
	meta.Network = netx.UDP
	l := tr.Link(meta, inner)
	defer l.Close()
	to := netx.DomainAddr("peer.example", 53)
	run := [][]byte{make([]byte, 5), make([]byte, 7), make([]byte, 11)}
	if n, err := l.WritePackets(run, to); n != 3 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	inner.sendable = 1
	if n, err := l.WritePackets(run, to); n != 1 || err == nil {
		t.Fatalf("WritePackets = %d, %v; want 1 and the error", n, err)
	}
	if want := []int{3, 3}; !slices.Equal(inner.runs, want) {
		t.Fatalf("runs %v reached the link beneath, want %v", inner.runs, want)
	}
	if s, _ := tr.Lookup(l.ID()); s.Up != 23+5 {
		t.Fatalf("up %d, want %d", s.Up, 23+5)
	}
}
