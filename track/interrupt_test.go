package track_test

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"switchyard/netx"
	"switchyard/track"
)

// through reports whether the flow's chain passes through group.
func through(group string) func(track.Meta) bool {
	return func(m track.Meta) bool { return slices.Contains(m.Chain, group) }
}

// Interrupt closes exactly the conns and links whose chain matches, and
// says how many; the rest go on.
func TestInterruptClosesTheMatchingFlows(t *testing.T) {
	tr := track.New()
	const n = 300
	var (
		conns []*countConn
		links []*sinkLink
		tcs   []*track.Conn
		tls   []*track.Link
	)
	for i := range n {
		meta := tcpMeta()
		meta.Chain = []string{"select", fmt.Sprint("g", i%3), "leaf"}
		c := &countConn{}
		conns, tcs = append(conns, c), append(tcs, tr.Conn(meta, c))
		meta.Network = netx.UDP
		l := newSinkLink()
		links, tls = append(links, l), append(tls, tr.Link(meta, l))
	}
	if got := tr.Interrupt(through("g1")); got != 2*n/3 {
		t.Fatalf("Interrupt closed %d flows, want %d", got, 2*n/3)
	}
	for i := range n {
		hit := i%3 == 1
		if closed := conns[i].closes.Load() == 1; closed != hit {
			t.Fatalf("conn %d: closed %v, want %v", i, closed, hit)
		}
		if closed := links[i].closes.Load() == 1; closed != hit {
			t.Fatalf("link %d: closed %v, want %v", i, closed, hit)
		}
		_, err := tcs[i].Write([]byte("x"))
		if hit != errors.Is(err, track.ErrKilled) {
			t.Fatalf("conn %d: write %v after the interrupt", i, err)
		}
		err = tls[i].WritePacket([]byte("x"), netx.DomainAddr("a", 1))
		if hit != errors.Is(err, track.ErrKilled) {
			t.Fatalf("link %d: write %v after the interrupt", i, err)
		}
	}
	flows := tr.Flows()
	if len(flows) != 2*n*2/3 {
		t.Fatalf("%d flows left, want %d", len(flows), 2*n*2/3)
	}
	for _, f := range flows {
		if through("g1")(f.Meta) {
			t.Fatalf("flow %d still listed: %v", f.ID, f.Chain)
		}
	}
	if got := tr.Interrupt(through("g1")); got != 0 {
		t.Fatalf("a second Interrupt closed %d flows", got)
	}
	if got := tr.Interrupt(func(track.Meta) bool { return true }); got != len(flows) {
		t.Fatalf("Interrupt of all closed %d, want %d", got, len(flows))
	}
}

// Concurrent Interrupts of the same flows count each flow once in all, and
// each flow is closed once.
func TestConcurrentInterruptsCountEachFlowOnce(t *testing.T) {
	for range 20 {
		tr := track.New()
		const n = 500
		conns := make([]*countConn, n)
		for i := range conns {
			conns[i] = &countConn{}
			meta := tcpMeta()
			meta.Chain = []string{"proxy", "auto"}
			tr.Conn(meta, conns[i])
		}
		var (
			total atomic.Int64
			wg    sync.WaitGroup
			start = make(chan struct{})
		)
		for range 8 {
			wg.Go(func() {
				<-start
				total.Add(int64(tr.Interrupt(through("auto"))))
			})
		}
		close(start)
		wg.Wait()
		if total.Load() != n {
			t.Fatalf("the interrupts counted %d flows, want %d", total.Load(), n)
		}
		for i, c := range conns {
			if c.closes.Load() != 1 {
				t.Fatalf("conn %d closed %d times", i, c.closes.Load())
			}
		}
		if len(tr.Flows()) != 0 {
			t.Fatal("flows left after the interrupts")
		}
	}
}

// slowConn's Close returns once release is closed.
type slowConn struct {
	countConn
	entered chan struct{}
	release chan struct{}
}

func (s *slowConn) Close() error {
	close(s.entered)
	<-s.release
	return s.countConn.Close()
}

// Interrupt returns once the close returned: the caller whose close runs
// counts the flow, a concurrent one waits for it and does not.
func TestInterruptWaitsForTheClose(t *testing.T) {
	tr := track.New()
	c := &slowConn{entered: make(chan struct{}), release: make(chan struct{})}
	tr.Conn(tcpMeta(), c)
	first, second := make(chan int, 1), make(chan int, 1)
	go func() { first <- tr.Interrupt(through("auto")) }()
	<-c.entered
	go func() { second <- tr.Interrupt(through("auto")) }()
	select {
	case n := <-first:
		t.Fatalf("Interrupt returned %d while the close ran", n)
	case n := <-second:
		t.Fatalf("a concurrent Interrupt returned %d while the close ran", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(c.release)
	if n := <-first; n != 1 {
		t.Fatalf("the Interrupt that closed the flow counted %d", n)
	}
	if n := <-second; n != 0 {
		t.Fatalf("the concurrent Interrupt counted %d", n)
	}
	if c.closes.Load() != 1 {
		t.Fatalf("closed %d times", c.closes.Load())
	}
}

// A flow that closes on its own is counted by no Interrupt, even when its
// close is still running as the Interrupt comes; the Interrupt waits for it.
func TestAFlowClosingOnItsOwnIsNotCounted(t *testing.T) {
	tr := track.New()
	done := &countConn{}
	tr.Conn(tcpMeta(), done).Close()
	c := &slowConn{entered: make(chan struct{}), release: make(chan struct{})}
	tc := tr.Conn(tcpMeta(), c)
	go tc.Close()
	<-c.entered
	got := make(chan int, 1)
	go func() { got <- tr.Interrupt(through("auto")) }()
	select {
	case n := <-got:
		t.Fatalf("Interrupt returned %d while the flow's own close ran", n)
	case <-time.After(50 * time.Millisecond):
	}
	close(c.release)
	if n := <-got; n != 0 {
		t.Fatalf("Interrupt counted %d flows that closed on their own", n)
	}
	if _, err := tc.Write([]byte("x")); errors.Is(err, track.ErrKilled) || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("a flow closed by its owner writes %v", err)
	}
}

// Flows closing on their own while many Interrupts run are closed once
// each, and the interrupts count only what they closed.
func TestInterruptsRaceFlowsClosingOnTheirOwn(t *testing.T) {
	tr := track.New()
	const n = 400
	conns := make([]*countConn, n)
	tcs := make([]*track.Conn, n)
	for i := range conns {
		conns[i] = &countConn{}
		tcs[i] = tr.Conn(tcpMeta(), conns[i])
	}
	var (
		interrupted atomic.Int64
		wg          sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() { interrupted.Add(int64(tr.Interrupt(through("auto")))) })
	}
	wg.Go(func() {
		for _, c := range tcs {
			c.Close()
		}
	})
	wg.Wait()
	var killed int64
	for i, c := range conns {
		if c.closes.Load() != 1 {
			t.Fatalf("conn %d closed %d times", i, c.closes.Load())
		}
		if _, err := tcs[i].Write([]byte("x")); errors.Is(err, track.ErrKilled) {
			killed++
		}
	}
	if interrupted.Load() != killed {
		t.Fatalf("the interrupts counted %d flows, %d were closed by them", interrupted.Load(), killed)
	}
}

// ErrKilled matches net.ErrClosed: the flow's conn was closed, by its owner.
func TestErrKilledIsAClose(t *testing.T) {
	if !errors.Is(track.ErrKilled, net.ErrClosed) || !errors.Is(fmt.Errorf("read: %w", track.ErrKilled), track.ErrKilled) {
		t.Fatal("ErrKilled does not match itself and net.ErrClosed")
	}
	if track.ErrKilled.Error() != "flow killed" {
		t.Fatalf("text %q", track.ErrKilled)
	}
}
