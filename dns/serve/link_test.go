package serve

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"switchyard/netx"
)

func readAnswer(t *testing.T, l netx.PacketLink) (*dns.Msg, netx.Addr) {
	t.Helper()
	type got struct {
		n    int
		from netx.Addr
		err  error
		buf  []byte
	}
	c := make(chan got, 1)
	go func() {
		buf := make([]byte, 4096)
		n, from, err := l.ReadPacket(buf)
		c <- got{n, from, err, buf}
	}()
	select {
	case g := <-c:
		if g.err != nil {
			t.Fatal(g.err)
		}
		return unpack(t, g.buf[:g.n]), g.from
	case <-time.After(5 * time.Second):
		t.Fatal("no answer")
	}
	panic("unreachable")
}

// Each answer comes back attributed to the address its query was sent to.
func TestLinkAttributesAnswersToTheQuerysDestination(t *testing.T) {
	s := New(fixed(1), Options{})
	l := s.PacketLink()
	defer l.Close()
	dsts := map[uint16]netx.Addr{
		1: netx.AddrFromAddrPort(netip.MustParseAddrPort("1.1.1.1:53")),
		2: netx.AddrFromAddrPort(netip.MustParseAddrPort("[2606:4700::1111]:53")),
		3: netx.DomainAddr("dns.test", 5353),
	}
	for id, to := range dsts {
		if err := l.WritePacket(mkQuery(t, id, "a.test.", dns.TypeA, 0), to); err != nil {
			t.Fatal(err)
		}
	}
	for range dsts {
		r, from := readAnswer(t, l)
		if want := dsts[r.Id]; from != want {
			t.Fatalf("answer %d from %v, want %v", r.Id, from, want)
		}
	}
}

// Bad input never ends the link: garbage is dropped or answered FORMERR,
// and the next good query is answered.
func TestLinkSurvivesBadInput(t *testing.T) {
	s := New(fixed(1), Options{})
	l := s.PacketLink()
	defer l.Close()
	to := netx.AddrFromAddrPort(netip.MustParseAddrPort("192.0.2.53:53"))
	for _, bad := range [][]byte{nil, {1, 2, 3}, make([]byte, 70000)} {
		if err := l.WritePacket(bad, to); err != nil {
			t.Fatalf("writing %d bad bytes: %v", len(bad), err)
		}
	}
	if r, _ := readAnswer(t, l); r.Rcode != dns.RcodeFormatError { // the 70,000 zero bytes: a header
		t.Fatalf("rcode %s", dns.RcodeToString[r.Rcode])
	}
	if err := l.WritePacket(mkQuery(t, 11, "a.test.", dns.TypeA, 0), to); err != nil {
		t.Fatal(err)
	}
	if r, _ := readAnswer(t, l); r.Id != 11 || r.Rcode != dns.RcodeSuccess {
		t.Fatalf("reply %v", r)
	}
	if st := s.Stats(); st.Queries != 4 || st.Dropped != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// At most MaxInFlight queries are held at once; the rest are dropped until
// answers are read.
func TestLinkBoundsQueriesInFlight(t *testing.T) {
	release := make(chan struct{})
	x := exchangeFunc(func(ctx context.Context, q *dns.Msg) (*dns.Msg, error) {
		select {
		case <-release:
			return answerA(q, 1), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	s := New(x, Options{MaxInFlight: 4})
	l := s.PacketLink()
	defer l.Close()
	to := netx.DomainAddr("dns.test", 53)
	for i := range 6 {
		if err := l.WritePacket(mkQuery(t, uint16(i), "a.test.", dns.TypeA, 0), to); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Dropped != 2 {
		t.Fatalf("dropped %d, want 2", st.Dropped)
	}
	close(release)
	for range 4 {
		readAnswer(t, l)
	}
	// Read answers free their places.
	if err := l.WritePacket(mkQuery(t, 99, "a.test.", dns.TypeA, 0), to); err != nil {
		t.Fatal(err)
	}
	if r, _ := readAnswer(t, l); r.Id != 99 {
		t.Fatalf("answer %d", r.Id)
	}
}

// WaitPacket gives the next answer's size without taking it; ReadPacket
// then returns that answer.
func TestLinkWaitPacket(t *testing.T) {
	l := New(fixed(3), Options{}).PacketLink()
	defer l.Close()
	if err := l.WritePacket(mkQuery(t, 3, "a.test.", dns.TypeA, 0), netx.DomainAddr("d.test", 53)); err != nil {
		t.Fatal(err)
	}
	size, err := netx.WaitPacket(l)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := netx.WaitPacket(l)
	buf := make([]byte, size)
	n, _, err := l.ReadPacket(buf)
	if err != nil || n != size || again != size {
		t.Fatalf("n %d size %d again %d err %v", n, size, again, err)
	}
	if r := unpack(t, buf[:n]); r.Id != 3 || len(r.Answer) != 3 {
		t.Fatalf("reply %v", r)
	}
}

// Close cancels the queries in progress, waits for them, and unblocks the
// reader; the link then refuses writes.
func TestLinkCloseEndsPendingWork(t *testing.T) {
	started := make(chan struct{}, 8)
	x := exchangeFunc(func(ctx context.Context, _ *dns.Msg) (*dns.Msg, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	l := New(x, Options{Timeout: time.Hour}).PacketLink()
	for i := range 3 {
		if err := l.WritePacket(mkQuery(t, uint16(i), "a.test.", dns.TypeA, 0), netx.DomainAddr("d.test", 53)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		<-started
	}
	readErr := make(chan error, 2)
	go func() { _, _, err := l.ReadPacket(make([]byte, 512)); readErr <- err }()
	go func() { _, err := netx.WaitPacket(l); readErr <- err }()
	time.Sleep(10 * time.Millisecond)
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	for range 2 {
		if err := <-readErr; !errors.Is(err, net.ErrClosed) {
			t.Fatalf("reader: %v", err)
		}
	}
	if err := l.WritePacket(mkQuery(t, 1, "a.test.", dns.TypeA, 0), netx.DomainAddr("d.test", 53)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// A reply longer than the reader's buffer is truncated, as on a socket.
func TestLinkShortBufferTruncates(t *testing.T) {
	l := New(fixed(1), Options{}).PacketLink()
	defer l.Close()
	if err := l.WritePacket(mkQuery(t, 3, "a.test.", dns.TypeA, 0), netx.DomainAddr("d.test", 53)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	n, _, err := l.ReadPacket(buf)
	if err != nil || n != 5 {
		t.Fatalf("n %d err %v", n, err)
	}
}
