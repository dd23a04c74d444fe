package fanout_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/fanout"
	"switchyard/netx"
)

// eventually waits for cond, failing with what after a while.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal(what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestPacketsWaitForTheirSubLinkToOpenAndGoInOrder(t *testing.T) {
	slow := &scriptedOutbound{gate: make(chan struct{})}
	a := newAssoc(t, planeOf(t, 1, target("slow", 1, slow)))
	to := netx.DomainAddr("peer.example", 5)
	for i := range fanout.MaxQueued + 4 {
		a.send(t, strconv.Itoa(i), to)
	}
	if n := a.Dropped(); n != 4 {
		t.Fatalf("%d dropped past a queue of %d, want 4", n, fanout.MaxQueued)
	}
	if n := a.logs.count(fmt.Sprintf("udp fan-out: dropping a datagram for slow@v1: %d are waiting for it to open", fanout.MaxQueued)); n != 4 {
		t.Fatalf("%d drops logged; logged:\n%s", n, a.logs)
	}
	close(slow.gate)
	a.Settle()
	if n := slow.dials.Load(); n != 1 {
		t.Fatalf("%d opens for one version, want 1", n)
	}
	got := slow.opened()[0].payloads()
	if len(got) != fanout.MaxQueued {
		t.Fatalf("sent %q, want the %d queued", got, fanout.MaxQueued)
	}
	for i, p := range got {
		if p != strconv.Itoa(i) {
			t.Fatalf("sent %q: not in order", got)
		}
	}
	a.send(t, "open now", to)
	if got := slow.opened()[0].payloads(); got[len(got)-1] != "open now" {
		t.Fatal("a packet to an open sub-link was not sent at once")
	}
}

// Packets that arrive while the queue is being flushed wait their turn.
func TestNoPacketOvertakesTheQueue(t *testing.T) {
	slow := &scriptedOutbound{gate: make(chan struct{})}
	a := newAssoc(t, planeOf(t, 1, target("slow", 1, slow)))
	to := netx.DomainAddr("peer.example", 5)
	const total = 400
	for i := range total {
		if i == 8 {
			close(slow.gate)
		}
		a.send(t, strconv.Itoa(i), to)
	}
	a.Settle()
	got := slow.opened()[0].payloads()
	if uint64(len(got))+a.Dropped() != total {
		t.Fatalf("%d sent and %d dropped of %d", len(got), a.Dropped(), total)
	}
	last := -1
	for _, p := range got {
		n, _ := strconv.Atoi(p)
		if n <= last {
			t.Fatalf("%d sent after %d", n, last)
		}
		last = n
	}
}

func TestTheQueueOfAnOpeningSubLinkIsBoundInBytes(t *testing.T) {
	slow := &scriptedOutbound{gate: make(chan struct{})}
	a := newAssoc(t, planeOf(t, 1, target("slow", 1, slow)))
	to := netx.DomainAddr("peer.example", 5)
	big := strings.Repeat("x", netx.MediumBuf+1000) // a buffer of the largest size
	a.send(t, big, to)
	a.send(t, big, to)
	a.send(t, "small", to)
	if n := a.Dropped(); n != 2 {
		t.Fatalf("%d dropped past %d bytes of queue, want 2", n, fanout.MaxQueuedBytes)
	}
	close(slow.gate)
	a.Settle()
	if got := slow.opened()[0].payloads(); len(got) != 1 || got[0] != big {
		t.Fatalf("sent %d packets, want the first large one", len(got))
	}
}

func TestAFailedOpenDropsItsQueueAndIsNotRetriedAtOnce(t *testing.T) {
	peer := newEcho(t)
	dead := &scriptedOutbound{gate: make(chan struct{}), openErr: errors.New("connection refused")}
	a := newAssoc(t, planeOf(t, 1, target("direct", 1, &udpOutbound{}), byPort{9, target("dead", 1, dead)}))
	now := time.Unix(1_000_000, 0)
	var clock sync.Mutex
	a.SetClock(func() time.Time { clock.Lock(); defer clock.Unlock(); return now })
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	to := netx.DomainAddr("dead.example", 9)

	for range 5 {
		a.send(t, "waits", to)
	}
	close(dead.gate)
	a.Settle()
	if n := a.Dropped(); n != 5 {
		t.Fatalf("%d dropped after a failed open, want the 5 queued", n)
	}
	if a.logs.count("udp fan-out: opening dead@v1 failed: connection refused") != 1 ||
		a.logs.count("udp fan-out: dropped 5 datagrams waiting for dead@v1") != 1 {
		t.Fatalf("logged:\n%s", a.logs)
	}
	for range 50 {
		a.send(t, "burst", to)
	}
	advance(fanout.OpenBackoff - time.Millisecond)
	a.send(t, "still backing off", to)
	a.Settle()
	if n := dead.dials.Load(); n != 1 {
		t.Fatalf("%d opens of a dead version within its backoff, want 1", n)
	}
	if n := a.Dropped(); n != 56 {
		t.Fatalf("%d dropped, want 56", n)
	}
	if n := a.logs.count(fmt.Sprintf("udp fan-out: dropping a datagram for dead@v1: opening it failed less than %v ago", fanout.OpenBackoff)); n != 51 {
		t.Fatalf("%d drops in backoff logged, want 51", n)
	}
	a.send(t, "healthy", peer.addr)
	if d := a.reply(t); d.payload != "healthy" {
		t.Fatalf("got %q", d.payload)
	}
	advance(time.Millisecond)
	a.send(t, "retry", to)
	a.Settle()
	if n := dead.dials.Load(); n != 2 {
		t.Fatalf("%d opens once the backoff ran out, want 2", n)
	}
}

func TestOpeningSubLinksCountTowardMaxSubs(t *testing.T) {
	silent := make([]*silentOutbound, fanout.MaxSubs+1)
	var rules []byPort
	for i := range silent {
		silent[i] = newSilent()
		rules = append(rules, byPort{uint16(20000 + i), target(fmt.Sprint("silent", i), 1, silent[i])})
	}
	a := newAssoc(t, planeOf(t, 1, target("block", 1, &scriptedOutbound{}), rules...))
	inFlight := func() int {
		n := 0
		for _, s := range silent {
			n += int(s.inFlight.Load())
		}
		return n
	}
	for i := range fanout.MaxSubs {
		a.send(t, "x", toPort(i))
	}
	eventually(t, "the opens did not start", func() bool { return inFlight() == fanout.MaxSubs })
	a.send(t, "x", toPort(fanout.MaxSubs))
	select {
	case err := <-silent[0].ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the evicted open ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the least recently used opening sub-link was not evicted")
	}
	eventually(t, "the evicted open's packet was not counted", func() bool { return a.Dropped() == 1 })
	eventually(t, "the opens in flight are not MaxSubs", func() bool { return inFlight() == fanout.MaxSubs })

	// An eviction is no failure: the version opens again at once.
	a.send(t, "back", toPort(0))
	eventually(t, "an evicted version was not opened again", func() bool { return silent[0].dials.Load() == 2 })
	select {
	case err := <-silent[1].ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the next least recently used open ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reopening an evicted version evicted nothing")
	}
	if a.logs.count("udp fan-out: opening silent0@v1 failed: context canceled") != 0 {
		t.Fatalf("an evicted open was logged as failed; logged:\n%s", a.logs)
	}
}

func TestASteadySendAllocatesNothing(t *testing.T) {
	out := &scriptedOutbound{forget: true}
	a := newAssoc(t, planeOf(t, 1, target("hole", 1, out)))
	to := netx.DomainAddr("peer.example", 5)
	payload := make([]byte, 1200)
	a.send(t, "open", to)
	a.Settle()
	if n := testing.AllocsPerRun(200, func() { a.WritePacket(payload, to) }); n != 0 {
		t.Fatalf("%v allocations per packet on an open sub-link", n)
	}
}
