package fanout_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"switchyard/netx"
)

// batchOutbound's links take runs of packets (netx.PacketBatchWriter) and
// record each run; failAt, when set, makes the first link's first run
// fail at that index.
type batchOutbound struct {
	scriptedOutbound
	failAt int
	mu     sync.Mutex
	links  []*batchLink
}

func (o *batchOutbound) DialPacket(ctx context.Context, f netx.Flow) (netx.PacketLink, error) {
	l, err := o.scriptedOutbound.DialPacket(ctx, f)
	if err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	b := &batchLink{scriptedLink: l.(*scriptedLink)}
	if len(o.links) == 0 && o.failAt > 0 {
		b.failAt = o.failAt
	}
	o.links = append(o.links, b)
	return b, nil
}

func (o *batchOutbound) link(i int) *batchLink {
	o.mu.Lock()
	defer o.mu.Unlock()
	if i >= len(o.links) {
		return nil
	}
	return o.links[i]
}

type batchLink struct {
	*scriptedLink
	failAt int
	failed atomic.Bool
	mu     sync.Mutex
	runs   [][]string
}

func (l *batchLink) WritePackets(ps [][]byte, to netx.Addr) (int, error) {
	var run []string
	for i, p := range ps {
		if l.failAt > 0 && i == l.failAt && !l.failed.Swap(true) {
			l.record(run)
			return i, errors.New("sendmsg: no buffer space available")
		}
		if err := l.WritePacket(p, to); err != nil {
			l.record(run)
			return i, err
		}
		run = append(run, string(p))
	}
	l.record(run)
	return len(ps), nil
}

func (l *batchLink) record(run []string) {
	l.mu.Lock()
	l.runs = append(l.runs, run)
	l.mu.Unlock()
}

func (l *batchLink) batches() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.runs)
}

func packets(s ...string) [][]byte {
	ps := make([][]byte, len(s))
	for i, p := range s {
		ps[i] = []byte(p)
	}
	return ps
}

// WritePackets routes each packet on its own and hands each sub-link the
// run that lands on it in one call, so that a socket can send it in one
// system call; packets for a sub-link still opening wait for it as
// WritePacket's do.
func TestWritePacketsHandsEachSubLinkItsRun(t *testing.T) {
	outA, outB := &batchOutbound{}, &batchOutbound{}
	a := newAssoc(t, planeOf(t, 1, target("a", 1, outA), byPort{9, target("b", 1, outB)}))
	toA, toB := netx.DomainAddr("peer.example", 8), netx.DomainAddr("peer.example", 9)

	// The first packets open both sub-links; they wait for the opens.
	if n, err := a.WritePackets(packets("a0", "a1"), toA); n != 2 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	if n, err := a.WritePackets(packets("b0"), toB); n != 1 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	eventually(t, "the queued packets were never sent", func() bool {
		la, lb := outA.link(0), outB.link(0)
		return la != nil && lb != nil && la.sent.Load() == 2 && lb.sent.Load() == 1
	})

	if n, err := a.WritePackets(packets("a2", "a3", "a4"), toA); n != 3 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	if n, err := a.WritePackets(packets("b1", "b2"), toB); n != 2 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	if got, want := outA.link(0).batches(), [][]string{{"a2", "a3", "a4"}}; !equalRuns(got, want) {
		t.Fatalf("a's runs = %q, want %q", got, want)
	}
	if got, want := outB.link(0).batches(), [][]string{{"b1", "b2"}}; !equalRuns(got, want) {
		t.Fatalf("b's runs = %q, want %q", got, want)
	}
	if got, want := outA.link(0).payloads(), []string{"a0", "a1", "a2", "a3", "a4"}; !slices.Equal(got, want) {
		t.Fatalf("a was sent %q, want %q", got, want)
	}
	if n := a.Dropped(); n != 0 {
		t.Fatalf("%d packets dropped", n)
	}
	// Every packet counts toward its sub-link's upload as WritePacket's do.
	var up []int64
	for _, f := range a.tracker.Flows() {
		up = append(up, f.Up)
	}
	slices.Sort(up)
	if want := []int64{int64(len("b0b1b2")), int64(len("a0a1a2a3a4"))}; !slices.Equal(up, want) {
		t.Fatalf("uploads = %v, want %v", up, want)
	}
}

// A run whose send fails part-way: the sub-link is removed as after a
// failed WritePacket, the packet it failed on is dropped and counted, and
// the packets after it go as WritePacket sends them, on a sub-link opened
// again.
func TestWritePacketsRoutesTheRestOfAFailedRunAgain(t *testing.T) {
	out := &batchOutbound{failAt: 1}
	a := newAssoc(t, planeOf(t, 1, target("a", 1, out)))
	to := netx.DomainAddr("peer.example", 8)

	a.send(t, "p0", to)
	eventually(t, "the first packet was never sent", func() bool {
		l := out.link(0)
		return l != nil && l.sent.Load() == 1
	})
	if n, err := a.WritePackets(packets("p1", "p2", "p3"), to); n != 3 || err != nil {
		t.Fatalf("WritePackets = %d, %v", n, err)
	}
	eventually(t, "the rest of the run was never sent on a new sub-link", func() bool {
		l := out.link(1)
		return l != nil && l.sent.Load() == 1
	})
	if got, want := out.link(0).payloads(), []string{"p0", "p1"}; !slices.Equal(got, want) {
		t.Fatalf("the failed link was sent %q, want %q", got, want)
	}
	if out.link(0).closes.Load() == 0 {
		t.Fatal("the failed sub-link was not closed")
	}
	if got, want := out.link(1).payloads(), []string{"p3"}; !slices.Equal(got, want) {
		t.Fatalf("the new link was sent %q, want %q", got, want)
	}
	if n := a.Dropped(); n != 1 {
		t.Fatalf("%d packets dropped, want the one whose send failed", n)
	}
}

func equalRuns(a, b [][]string) bool {
	return slices.EqualFunc(a, b, func(x, y []string) bool { return slices.Equal(x, y) })
}
