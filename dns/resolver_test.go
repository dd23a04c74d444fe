package dns

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
)

func TestIdenticalQuestionsShareOneExchange(t *testing.T) {
	z := newZone()
	z.hold = make(chan struct{})
	z.held = make(chan struct{}, 100)
	a := startUDP(t, z)
	r := newResolver(t, Options{Timeout: 5 * time.Second}, "udp://"+a.String())
	const n = 20
	var wg sync.WaitGroup
	results := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			if i%2 == 0 {
				ips, err := r.LookupIP(ctxT(t), "slow.test")
				if err == nil && !slices.Equal(ips, addrs("192.0.2.5")) {
					err = errors.New("wrong answer")
				}
				results <- err
				return
			}
			q := question("SLOW.test", mdns.TypeA)
			q.Id = uint16(i)
			resp, err := r.Exchange(ctxT(t), q)
			if err == nil && (resp.Id != uint16(i) || len(resp.Answer) != 1 || resp.Question[0].Name != "SLOW.test.") {
				err = errors.New("wrong answer: " + resp.String())
			}
			results <- err
		})
	}
	// Every caller has asked (each counts its question first); the
	// server holds its answer until then.
	deadline := time.Now().Add(5 * time.Second)
	for r.Stats().Queries < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	<-z.held // the A question reached the server
	time.Sleep(20 * time.Millisecond)
	close(z.hold)
	wg.Wait()
	close(results)
	for err := range results {
		if err != nil {
			t.Error(err)
		}
	}
	// Distinct queries: a slow answer may have made the client send its
	// query again, which is still one exchange.
	if c := z.distinct("slow.test.", mdns.TypeA); c != 1 {
		t.Errorf("%d A queries reached the server, want 1", c)
	}
	if c := z.distinct("slow.test.", mdns.TypeAAAA); c != 1 {
		t.Errorf("%d AAAA queries reached the server, want 1", c)
	}
}

func TestCloseEndsExchangesInFlight(t *testing.T) {
	z := newZone()
	z.hold = make(chan struct{})
	defer close(z.hold) // lets the server's handler end
	a := startUDP(t, z)
	r := New(servers(t, "udp://"+a.String()), Options{Timeout: time.Minute})
	errc := make(chan error, 1)
	go func() {
		_, err := r.LookupIP(context.Background(), "slow.test")
		errc <- err
	}()
	for r.Stats().Queries == 0 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Close did not end the exchange")
	}
	if err := <-errc; err == nil {
		t.Fatal("the lookup succeeded")
	}
	if _, err := r.LookupIP(context.Background(), "a.test"); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
}

func TestCallerDeadline(t *testing.T) {
	z := newZone()
	z.hold = make(chan struct{})
	defer close(z.hold)
	a := startUDP(t, z)
	r := newResolver(t, Options{Timeout: time.Minute}, "udp://"+a.String())
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := r.LookupIP(ctx, "slow.test"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("returned after %v", took)
	}
}

// cached is a resolver over a UDP server of z with a fake clock.
func cached(t *testing.T, z *zone, o Options) (*Resolver, *fakeClock) {
	a := startUDP(t, z)
	clk := newClock()
	o.Now = clk.Now
	o.Timeout = 2 * time.Second
	return newResolver(t, o, "udp://"+a.String()), clk
}

func TestTTLExpiry(t *testing.T) {
	z := newZone()
	r, clk := cached(t, z, Options{})
	ctx := ctxT(t)
	ips, ttl, err := r.LookupIPTTL(ctx, "a.test")
	if err != nil || len(ips) != 2 || ttl != 300*time.Second {
		t.Fatalf("LookupIPTTL = %v, %v, %v", ips, ttl, err)
	}
	clk.Advance(100 * time.Second)
	_, ttl, _ = r.LookupIPTTL(ctx, "A.test.")
	if ttl != 200*time.Second {
		t.Errorf("TTL after 100 s: %v", ttl)
	}
	resp, err := r.Exchange(ctx, question("a.test", mdns.TypeAAAA))
	if err != nil || resp.Answer[0].Header().Ttl != 500 {
		t.Fatalf("AAAA from the cache after 100 s: %v, %v", resp, err)
	}
	if z.count("a.test.", mdns.TypeA) != 1 || z.count("a.test.", mdns.TypeAAAA) != 1 {
		t.Fatal("the cache was not used")
	}
	clk.Advance(200 * time.Second) // A expired; AAAA has 300 s left
	_, ttl, _ = r.LookupIPTTL(ctx, "a.test")
	if ttl != 300*time.Second {
		t.Errorf("TTL after the A expired: %v (the new A 300 s, the AAAA 300 s)", ttl)
	}
	if z.count("a.test.", mdns.TypeA) != 2 || z.count("a.test.", mdns.TypeAAAA) != 1 {
		t.Errorf("queries A %d AAAA %d, want 2 and 1", z.count("a.test.", mdns.TypeA), z.count("a.test.", mdns.TypeAAAA))
	}
	if s := r.Stats(); s.Queries != 4 || s.CacheHits != 2 {
		t.Errorf("stats %+v", s)
	}
	r.Flush()
	r.LookupIP(ctx, "a.test")
	if z.count("a.test.", mdns.TypeA) != 3 {
		t.Error("Flush kept the answer")
	}
}

func TestNegativeCaching(t *testing.T) {
	z := newZone()
	r, clk := cached(t, z, Options{})
	ctx := ctxT(t)
	_, ttl, err := r.LookupIPTTL(ctx, "nx.test")
	if !errors.Is(err, ErrNXDomain) || ttl != 30*time.Second {
		t.Fatalf("nx.test: %v, %v", ttl, err)
	}
	resp, err := r.Exchange(ctx, question("nx.test", mdns.TypeA))
	if err != nil || resp.Rcode != mdns.RcodeNameError || len(resp.Ns) != 1 || resp.Ns[0].Header().Ttl != 30 {
		t.Fatalf("Exchange nx.test: %v, %v", resp, err)
	}
	clk.Advance(29 * time.Second)
	r.LookupIP(ctx, "nx.test")
	if z.count("nx.test.", mdns.TypeA) != 1 {
		t.Error("NXDOMAIN was not cached")
	}
	clk.Advance(time.Second)
	r.LookupIP(ctx, "nx.test")
	if z.count("nx.test.", mdns.TypeA) != 2 {
		t.Error("NXDOMAIN outlived the SOA minimum")
	}

	ips, ttl, err := r.LookupIPTTL(ctx, "nodata.test")
	if err != nil || !slices.Equal(ips, addrs("192.0.2.3")) || ttl != 45*time.Second {
		t.Fatalf("nodata.test: %v, %v, %v", ips, ttl, err)
	}
	resp, err = r.Exchange(ctx, question("nodata.test", mdns.TypeAAAA))
	if err != nil || resp.Rcode != mdns.RcodeSuccess || len(resp.Answer) != 0 || resp.Ns[0].Header().Ttl != 45 {
		t.Fatalf("NODATA: %v, %v", resp, err)
	}
	if z.count("nodata.test.", mdns.TypeAAAA) != 1 {
		t.Error("NODATA was not cached")
	}

	// No SOA: not cached (RFC 2308 5).
	for range 2 {
		if _, err := r.LookupIP(ctx, "nosoa.test"); !errors.Is(err, ErrNXDomain) {
			t.Fatalf("nosoa.test: %v", err)
		}
	}
	if z.count("nosoa.test.", mdns.TypeA) != 2 {
		t.Error("an NXDOMAIN without SOA was cached")
	}
	// SERVFAIL is an error and is not cached.
	for range 2 {
		if _, err := r.LookupIP(ctx, "fail.test"); !errors.Is(err, ErrServerFailure) {
			t.Fatalf("fail.test: %v", err)
		}
	}
	if z.count("fail.test.", mdns.TypeA) != 2 {
		t.Error("SERVFAIL was cached")
	}
	resp, err = r.Exchange(ctx, question("fail.test", mdns.TypeA))
	if err != nil || resp.Rcode != mdns.RcodeServerFailure {
		t.Errorf("Exchange fail.test: %v, %v", resp, err)
	}
}

func TestTTLClamping(t *testing.T) {
	z := newZone()
	r, clk := cached(t, z, Options{MinTTL: 10 * time.Minute})
	ctx := ctxT(t)
	_, ttl, _ := r.LookupIPTTL(ctx, "a.test")
	if ttl != 10*time.Minute {
		t.Errorf("min clamp: TTL %v", ttl)
	}
	_, ttl, _ = r.LookupIPTTL(ctx, "nx.test")
	if ttl != 10*time.Minute {
		t.Errorf("min clamp of a negative TTL: %v", ttl)
	}
	clk.Advance(9 * time.Minute)
	resp, _ := r.Exchange(ctx, question("a.test", mdns.TypeA))
	if resp.Answer[0].Header().Ttl != 60 {
		t.Errorf("served TTL %d, want 60", resp.Answer[0].Header().Ttl)
	}
	if z.count("a.test.", mdns.TypeA) != 1 {
		t.Error("re-asked within the clamped TTL")
	}

	z2 := newZone()
	r2, _ := cached(t, z2, Options{MaxTTL: time.Minute})
	_, ttl, _ = r2.LookupIPTTL(ctx, "a.test")
	if ttl != time.Minute {
		t.Errorf("max clamp: TTL %v", ttl)
	}
	resp, _ = r2.Exchange(ctx, question("nx.test", mdns.TypeA))
	if resp.Ns[0].Header().Ttl != 30 {
		t.Errorf("negative TTL %d under the max", resp.Ns[0].Header().Ttl)
	}
	resp, _ = r2.Exchange(ctx, question("a.test", mdns.TypeAAAA))
	if resp.Answer[0].Header().Ttl != 60 {
		t.Errorf("served TTL %d, want 60", resp.Answer[0].Header().Ttl)
	}
}

func TestCacheLRUBound(t *testing.T) {
	z := newZone()
	r, _ := cached(t, z, Options{CacheSize: 2})
	ctx := ctxT(t)
	ask := func(name string) {
		if _, err := r.Exchange(ctx, question(name, mdns.TypeA)); err != nil {
			t.Fatal(err)
		}
	}
	ask("one.test")
	ask("two.test")
	ask("one.test") // one is now the most recent
	ask("three.test")
	if n := r.cache.Len(); n != 2 {
		t.Fatalf("%d entries, want 2", n)
	}
	ask("one.test")
	ask("two.test")
	if z.count("one.test.", mdns.TypeA) != 1 {
		t.Error("the most recent entry was evicted")
	}
	if z.count("two.test.", mdns.TypeA) != 2 {
		t.Error("the least recent entry was kept")
	}
}

func TestCacheKeyedByResolver(t *testing.T) {
	z1, z2 := newZone(), newZone()
	a1, a2 := startUDP(t, z1), startUDP(t, z2)
	shared := NewCache(CacheOptions{})
	r1 := newResolver(t, Options{Cache: shared}, "udp://"+a1.String())
	r2 := newResolver(t, Options{Cache: shared}, "udp://"+a2.String())
	ctx := ctxT(t)
	r1.LookupIP(ctx, "a.test")
	r2.LookupIP(ctx, "a.test")
	r1.LookupIP(ctx, "a.test")
	if z1.count("a.test.", mdns.TypeA) != 1 || z2.count("a.test.", mdns.TypeA) != 1 {
		t.Errorf("queries %d and %d, want one each", z1.count("a.test.", mdns.TypeA), z2.count("a.test.", mdns.TypeA))
	}
}

func TestExchangeOPT(t *testing.T) {
	z := newZone()
	r, _ := cached(t, z, Options{})
	ctx := ctxT(t)
	resp, err := r.Exchange(ctx, question("a.test", mdns.TypeA))
	if err != nil || resp.IsEdns0() != nil {
		t.Fatalf("a query without OPT got %v, %v", resp, err)
	}
	q := question("a.test", mdns.TypeA)
	q.SetEdns0(4096, false)
	resp, err = r.Exchange(ctx, q)
	if err != nil || resp.IsEdns0() == nil {
		t.Fatalf("a query with OPT got %v, %v", resp, err)
	}
	if _, err := r.Exchange(ctx, new(mdns.Msg)); !errors.Is(err, ErrBadQuery) {
		t.Errorf("no question: %v", err)
	}
	n := question("a.test", mdns.TypeSOA)
	n.Opcode = mdns.OpcodeNotify
	if resp, err := r.Exchange(ctx, n); err != nil || resp.Rcode != mdns.RcodeNotImplemented || z.count("a.test.", mdns.TypeSOA) != 0 {
		t.Errorf("NOTIFY: %v, %v", resp, err)
	}
}

func TestLookupLiteralAndBadNames(t *testing.T) {
	r := newResolver(t, Options{}, "udp://127.0.0.1:1")
	ips, err := r.LookupIP(ctxT(t), "::ffff:10.0.0.1")
	if err != nil || !slices.Equal(ips, []netip.Addr{netip.MustParseAddr("10.0.0.1")}) {
		t.Errorf("literal: %v, %v", ips, err)
	}
	for _, bad := range []string{"", "a..b", string(make([]byte, 300))} {
		if _, err := r.LookupIP(ctxT(t), bad); err == nil {
			t.Errorf("%q resolved", bad)
		}
	}
}

func TestLookupIPSliceIsTheCallers(t *testing.T) {
	z := newZone()
	r, _ := cached(t, z, Options{})
	ips, _ := r.LookupIP(ctxT(t), "a.test")
	ips[0] = netip.MustParseAddr("10.9.9.9")
	again, _ := r.LookupIP(ctxT(t), "a.test")
	if again[0] != netip.MustParseAddr("192.0.2.1") {
		t.Error("the caller's change reached the cache")
	}
}

func TestCacheHitAllocations(t *testing.T) {
	z := newZone()
	r, _ := cached(t, z, Options{})
	ctx := context.Background()
	if _, err := r.LookupIP(ctx, "a.test"); err != nil {
		t.Fatal(err)
	}
	buf := make([]netip.Addr, 0, 8)
	if n := testing.AllocsPerRun(100, func() { r.AppendIP(ctx, buf[:0], "a.test") }); n != 0 {
		t.Errorf("AppendIP hit: %v allocations", n)
	}
	if n := testing.AllocsPerRun(100, func() { r.LookupIP(ctx, "a.test") }); n != 1 {
		t.Errorf("LookupIP hit: %v allocations, want 1 (the caller's slice)", n)
	}
}

// logRecords keeps the messages of the records it handles.
type logRecords struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.msgs = append(l.msgs, r.Level.String()+" "+r.Message)
	l.mu.Unlock()
	return nil
}
func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

func TestDebugLinePerExchange(t *testing.T) {
	z := newZone()
	a := startUDP(t, z)
	logs := &logRecords{}
	r := newResolver(t, Options{Logger: slog.New(logs)}, "udp://"+a.String())
	r.Exchange(ctxT(t), question("nx.test", mdns.TypeA))
	r.Exchange(ctxT(t), question("nx.test", mdns.TypeA)) // cached: no exchange
	logs.mu.Lock()
	defer logs.mu.Unlock()
	if len(logs.msgs) != 1 {
		t.Fatalf("log lines %q", logs.msgs)
	}
	want := "DEBUG dns: udp://" + a.String() + " nx.test. A: NXDOMAIN in "
	if !strings.HasPrefix(logs.msgs[0], want) {
		t.Errorf("log line %q, want %q...", logs.msgs[0], want)
	}
}
