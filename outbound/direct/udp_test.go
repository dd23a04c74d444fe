package direct

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/netx"
)

// fakeResolver answers with answer and counts the lookups per name. It
// reports TTLs (netx.TTLResolver); wrap it in plainResolver to hide them.
type fakeResolver struct {
	answer func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error)

	mu    sync.Mutex
	calls map[string]int
}

func newFakeResolver(answer func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error)) *fakeResolver {
	return &fakeResolver{answer: answer, calls: map[string]int{}}
}

func (r *fakeResolver) LookupIPTTL(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
	r.mu.Lock()
	r.calls[host]++
	r.mu.Unlock()
	return r.answer(ctx, host)
}

func (r *fakeResolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	ips, _, err := r.LookupIPTTL(ctx, host)
	return ips, err
}

func (r *fakeResolver) lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// plainResolver is a resolver that reports no TTL, as the system one.
type plainResolver struct{ r *fakeResolver }

func (p plainResolver) LookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return p.r.LookupIP(ctx, host)
}

var loopback = []netip.Addr{netip.MustParseAddr("127.0.0.1")}

// gate holds lookups until it is opened or their context ends.
type gate chan struct{}

func (g gate) wait(ctx context.Context) error {
	select {
	case <-g:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// testLink is a resolving link on a real IPv4 socket with a settable clock
// and a goroutine collecting what it receives.
type testLink struct {
	*resolvingUDP
	clock   *clock
	replies chan string
}

func newTestLink(t *testing.T, r netx.Resolver, logs io.Writer) *testLink {
	t.Helper()
	if logs == nil {
		logs = io.Discard
	}
	u, err := netx.NewDialer(netx.SocketPolicy{}, time.Second).BindDual(context.Background(), []netx.Family{netx.V4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	l := &testLink{
		resolvingUDP: newResolvingUDP(u, r, netx.Auto, log),
		clock:        &clock{t: time.Unix(1_000_000, 0)},
		replies:      make(chan string, 64),
	}
	l.now = l.clock.now
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 2048)
		for {
			n, _, err := l.ReadPacket(b)
			if err != nil {
				return
			}
			l.replies <- string(b[:n])
		}
	}()
	t.Cleanup(func() { l.Close(); <-done })
	return l
}

func (l *testLink) send(t *testing.T, payload string, to netx.Addr) {
	t.Helper()
	if err := l.WritePacket([]byte(payload), to); err != nil {
		t.Fatalf("WritePacket to %v: %v", to, err)
	}
}

// reply waits for the next datagram the link receives.
func (l *testLink) reply(t *testing.T) string {
	t.Helper()
	select {
	case r := <-l.replies:
		return r
	case <-time.After(3 * time.Second):
		t.Fatal("no reply")
		return ""
	}
}

// settle waits for every lookup started so far.
func (l *testLink) settle() { l.lookups.Wait() }

func TestALookupInFlightHoldsUpNoDatagram(t *testing.T) {
	echo := udpEcho(t)
	held := make(gate)
	defer close(held)
	r := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		return nil, 0, held.wait(ctx)
	})
	l := newTestLink(t, r, nil)
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for i := range 10 {
			l.WritePacket([]byte("to a name"), netx.DomainAddr("slow.test", echo.Port()))
			l.WritePacket(fmt.Appendf(nil, "by ip %d", i), netx.AddrFromAddrPort(echo))
		}
	}()
	for i := range 10 {
		if got, want := l.reply(t), fmt.Sprintf("by ip %d", i); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	<-sent
	// The one lookup runs on a goroutine of its own: it may start after
	// the last send.
	for end := time.Now().Add(5 * time.Second); r.lookups("slow.test") == 0 && time.Now().Before(end); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := r.lookups("slow.test"); n != 1 {
		t.Fatalf("%d lookups of slow.test, want 1", n)
	}
}

func TestConcurrentDatagramsToANameShareOneLookup(t *testing.T) {
	echo := udpEcho(t)
	held := make(gate)
	r := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		if err := held.wait(ctx); err != nil {
			return nil, 0, err
		}
		return loopback, time.Minute, nil
	})
	l := newTestLink(t, r, nil)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() { l.send(t, fmt.Sprint("packet ", i), netx.DomainAddr("echo.test", echo.Port())) })
	}
	wg.Wait() // every send returned while the lookup is held
	close(held)
	got := map[string]bool{}
	for range 10 {
		got[l.reply(t)] = true
	}
	if len(got) != 10 {
		t.Fatalf("replies %v", got)
	}
	if n := r.lookups("echo.test"); n != 1 {
		t.Fatalf("%d lookups for 10 concurrent datagrams, want 1", n)
	}
	if n := l.Dropped(); n != 0 {
		t.Fatalf("%d dropped", n)
	}
}

func TestTheDatagramsWaitingForANameAreBounded(t *testing.T) {
	echo := udpEcho(t)
	held, heldBig := make(gate), make(gate)
	r := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		g := held
		if host == "big.test" {
			g = heldBig
		}
		if err := g.wait(ctx); err != nil {
			return nil, 0, err
		}
		return loopback, time.Minute, nil
	})
	logs := &lines{}
	l := newTestLink(t, r, logs)
	to := netx.DomainAddr("echo.test", echo.Port())
	for i := range maxQueued + 4 {
		l.send(t, fmt.Sprint(i), to)
	}
	if n := l.Dropped(); n != 4 {
		t.Fatalf("%d dropped past a queue of %d, want 4", n, maxQueued)
	}
	// Two datagrams in the largest buffers: the second is past the byte
	// bound.
	big := netx.DomainAddr("big.test", echo.Port())
	l.send(t, strings.Repeat("x", netx.MediumBuf+1000), big)
	l.send(t, strings.Repeat("y", netx.MediumBuf+1000), big)
	if n := l.Dropped(); n != 5 {
		t.Fatalf("%d dropped after two large datagrams, want 5", n)
	}
	close(held)
	for i := range maxQueued {
		if got := l.reply(t); got != fmt.Sprint(i) {
			t.Fatalf("reply %d is %.20q: the queue was not sent in order", i, got)
		}
	}
	close(heldBig)
	if got := l.reply(t); !strings.HasPrefix(got, "xxxx") { // the echo truncates it
		t.Fatalf("got %.10q…, want the first large datagram", got)
	}
	if !strings.Contains(logs.String(), fmt.Sprintf("freedom: dropping a datagram to echo.test:%d: 16 are waiting for it to resolve", echo.Port())) {
		t.Fatalf("the drop was not logged; logs:\n%s", logs)
	}
}

func TestSoManyNamesInFlightDropTheNext(t *testing.T) {
	held := make(gate)
	defer close(held)
	r := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		return nil, 0, held.wait(ctx)
	})
	l := newTestLink(t, r, nil)
	for i := range maxLookups + 1 {
		l.send(t, "x", netx.DomainAddr(fmt.Sprintf("n%d.test", i), 9))
	}
	if n := l.Dropped(); n != 1 {
		t.Fatalf("%d dropped with %d lookups in flight, want 1", n, maxLookups)
	}
	if n := r.lookups(fmt.Sprintf("n%d.test", maxLookups)); n != 0 {
		t.Fatalf("a lookup past the bound started")
	}
}

func TestAFailedLookupIsRememberedBriefly(t *testing.T) {
	r := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		return nil, 0, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	})
	logs := &lines{}
	l := newTestLink(t, r, logs)
	to := netx.DomainAddr("nowhere.test", 53)
	l.send(t, "first", to)
	l.settle()
	if n := l.Dropped(); n != 1 {
		t.Fatalf("%d dropped after a failed lookup, want 1", n)
	}
	for range 20 {
		l.send(t, "again", to)
	}
	if n := r.lookups("nowhere.test"); n != 1 {
		t.Fatalf("%d lookups within the negative TTL, want 1", n)
	}
	if n := l.Dropped(); n != 21 {
		t.Fatalf("%d dropped, want 21", n)
	}
	l.clock.advance(negativeTTL - time.Millisecond)
	l.send(t, "still", to)
	l.settle()
	if n := r.lookups("nowhere.test"); n != 1 {
		t.Fatalf("%d lookups just before the negative TTL ran out, want 1", n)
	}
	l.clock.advance(time.Millisecond)
	l.send(t, "retry", to)
	l.settle()
	if n := r.lookups("nowhere.test"); n != 2 {
		t.Fatalf("%d lookups once the negative TTL ran out, want 2", n)
	}
	for _, want := range []string{
		"freedom: nowhere.test did not resolve: lookup nowhere.test: no such host",
		"freedom: dropping a datagram to an unresolvable nowhere.test:53",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("missing %q; logs:\n%s", want, logs)
		}
	}
}

func TestAnAnswerLivesForItsTTL(t *testing.T) {
	for _, c := range []struct {
		name     string
		reported time.Duration // the resolver's TTL; -1 for a resolver that reports none
		lives    time.Duration
	}{
		{"as reported", 30 * time.Second, 30 * time.Second},
		{"no TTL", -1, netx.DefaultTTL},
		{"zero is raised", 0, minTTL},
		{"a day is cut", 24 * time.Hour, maxTTL},
	} {
		t.Run(c.name, func(t *testing.T) {
			echo := udpEcho(t)
			fake := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
				return loopback, c.reported, nil
			})
			var r netx.Resolver = fake
			if c.reported < 0 {
				r = plainResolver{fake}
			}
			l := newTestLink(t, r, nil)
			to := netx.DomainAddr("echo.test", echo.Port())
			l.send(t, "one", to)
			l.settle()
			l.clock.advance(c.lives - time.Millisecond)
			l.send(t, "two", to)
			l.settle()
			if n := fake.lookups("echo.test"); n != 1 {
				t.Fatalf("%d lookups before the answer expired, want 1", n)
			}
			l.clock.advance(time.Millisecond)
			l.send(t, "three", to) // sent to the expired answer while it is refreshed
			l.settle()
			if n := fake.lookups("echo.test"); n != 2 {
				t.Fatalf("%d lookups once the answer expired, want 2", n)
			}
			for _, want := range []string{"one", "two", "three"} {
				if got := l.reply(t); got != want {
					t.Fatalf("got %q, want %q", got, want)
				}
			}
		})
	}
}

func TestTheNameCacheIsBounded(t *testing.T) {
	r := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		if strings.HasPrefix(host, "bad") {
			return nil, 0, errors.New("refused")
		}
		return loopback, time.Minute, nil
	})
	l := newTestLink(t, r, nil)
	for i := range 3 * cacheSize {
		name := fmt.Sprintf("n%d.test", i)
		if i%2 == 1 {
			name = "bad" + name
		}
		l.send(t, "x", netx.DomainAddr(name, 9))
		l.settle()
		l.clock.advance(time.Millisecond)
	}
	l.mu.Lock()
	n := len(l.cache)
	l.mu.Unlock()
	if n != cacheSize {
		t.Fatalf("%d names cached, want %d", n, cacheSize)
	}
}

func TestCloseCancelsTheLookupsInFlight(t *testing.T) {
	cancelled := make(chan error, 1)
	r := newFakeResolver(func(ctx context.Context, host string) ([]netip.Addr, time.Duration, error) {
		<-ctx.Done()
		cancelled <- ctx.Err()
		return nil, 0, ctx.Err()
	})
	l := newTestLink(t, r, nil)
	l.send(t, "waits", netx.DomainAddr("hang.test", 9))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-cancelled:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the lookup ended with %v", err)
		}
	default:
		t.Fatal("Close returned before the lookup in flight ended")
	}
	if n := l.Dropped(); n != 1 {
		t.Fatalf("%d dropped, want the one that waited", n)
	}
	if err := l.WritePacket([]byte("late"), netx.DomainAddr("hang.test", 9)); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("WritePacket after Close: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cache) != 0 {
		t.Fatal("a lookup cancelled by Close was cached as a failure")
	}
}

// WritePackets sends a run to an address in one go and a run to a name
// one datagram at a time through the lookup; every datagram arrives, in
// order, as one of its own.
func TestWritePacketsSendsEachDatagramOfARun(t *testing.T) {
	echo := udpEcho(t)
	r := newFakeResolver(func(context.Context, string) ([]netip.Addr, time.Duration, error) {
		return loopback, time.Minute, nil
	})
	l := newTestLink(t, r, nil)
	for _, to := range []netx.Addr{netx.AddrFromAddrPort(echo), netx.DomainAddr("echo.test", echo.Port())} {
		var ps [][]byte
		for i := range 8 {
			ps = append(ps, fmt.Appendf(nil, "%v %d %s", to, i, strings.Repeat("x", 100)))
		}
		ps = append(ps, []byte("short"))
		if n, err := l.WritePackets(ps, to); n != len(ps) || err != nil {
			t.Fatalf("WritePackets to %v = %d, %v", to, n, err)
		}
		for _, p := range ps {
			if got := l.reply(t); got != string(p) {
				t.Fatalf("got %q, want %q", got, p)
			}
		}
	}
}
