package serve

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// records is a slog handler that keeps what it is given.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// at returns the records of level, each as its message and attributes.
func (r *records) at(level slog.Level) []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, rec := range r.recs {
		if rec.Level != level {
			continue
		}
		m := map[string]string{"msg": rec.Message}
		rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
		out = append(out, m)
	}
	return out
}

// fakeClock drives a guard: its time only moves when told, and its sleeps
// are recorded instead of slept.
type fakeClock struct {
	now    time.Time
	sleeps []time.Duration
}

func guardWithClock(log *slog.Logger) (*Guard, *fakeClock) {
	g := NewGuard(log)
	fc := &fakeClock{now: time.Unix(1_000_000, 0)}
	g.now = func() time.Time { return fc.now }
	g.sleep = func(_ context.Context, d time.Duration) bool {
		fc.sleeps = append(fc.sleeps, d)
		fc.now = fc.now.Add(d)
		return true
	}
	return g, fc
}

// A source's first three failures cost nothing; after them every attempt
// waits 100 ms, doubled per failure up to 5 s. A success or a quiet minute
// forgets it.
func TestGuardSlowsARepeatedFailure(t *testing.T) {
	g, fc := guardWithClock(nil)
	src := netip.MustParseAddrPort("192.0.2.7:40000")
	attempt := func() {
		g.Wait(context.Background(), src.Addr(), time.Time{})
		g.Failed(src, "u", "wrong")
	}
	for range 12 {
		attempt()
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000, 5000}
	if len(fc.sleeps) != len(want) {
		t.Fatalf("slept %v; want nothing for 3 attempts, then %v ms", fc.sleeps, want)
	}
	for i, d := range want {
		if fc.sleeps[i] != d*time.Millisecond {
			t.Fatalf("slept %v; want nothing for 3 attempts, then %v ms", fc.sleeps, want)
		}
	}
	// Another source is not slowed.
	if d := g.Delay(netip.MustParseAddr("192.0.2.8")); d != 0 {
		t.Fatalf("an unrelated source waits %v", d)
	}

	g.Succeeded(src.Addr())
	if d := g.Delay(src.Addr()); d != 0 {
		t.Fatalf("after a success the source still waits %v", d)
	}

	for range 5 {
		attempt()
	}
	if d := g.Delay(src.Addr()); d != 400*time.Millisecond {
		t.Fatalf("after 5 new failures the delay is %v, want 400ms", d)
	}
	fc.now = fc.now.Add(time.Minute)
	if d := g.Delay(src.Addr()); d != 0 {
		t.Fatalf("after a quiet minute the source still waits %v", d)
	}
	if g.Len() != 0 {
		t.Fatalf("a quiet source is still remembered (%d)", g.Len())
	}
}

// The wait never outlasts the handshake it is part of.
func TestGuardWaitStopsAtTheDeadline(t *testing.T) {
	g, fc := guardWithClock(nil)
	src := netip.MustParseAddrPort("192.0.2.7:40000")
	for range 10 {
		g.Failed(src, "", "wrong")
	}
	g.Wait(context.Background(), src.Addr(), time.Now().Add(time.Second))
	if len(fc.sleeps) != 1 || fc.sleeps[0] > time.Second {
		t.Fatalf("slept %v before a deadline 1s away", fc.sleeps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	g.sleep = sleepCtx
	if g.Wait(ctx, src.Addr(), time.Time{}) {
		t.Fatal("Wait reported true for a context already ended")
	}
}

// The table of sources is bounded: the source that failed least recently
// is forgotten first.
func TestGuardTableIsBounded(t *testing.T) {
	g, fc := guardWithClock(nil)
	addr := func(i int) netip.AddrPort {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 1)
	}
	for i := range maxGuarded + 1000 {
		for range 4 {
			g.Failed(addr(i), "", "wrong")
		}
		fc.now = fc.now.Add(time.Millisecond)
	}
	if g.Len() != maxGuarded {
		t.Fatalf("%d sources remembered, want the bound %d", g.Len(), maxGuarded)
	}
	if g.Delay(addr(0).Addr()) != 0 {
		t.Fatal("the oldest source is still remembered")
	}
	if g.Delay(addr(maxGuarded+999).Addr()) == 0 {
		t.Fatal("the latest source was forgotten")
	}
}

// Failures are logged at warn, at most one line per interval, naming the
// source and counting the failures since the previous line.
func TestGuardLogsFailuresAtWarnRateLimited(t *testing.T) {
	rec := &records{}
	g, fc := guardWithClock(slog.New(rec).With("inbound", "in"))
	for i := range 20 {
		g.Failed(netip.MustParseAddrPort(fmt.Sprintf("192.0.2.%d:1", i+1)), "admin", "wrong")
	}
	warns := rec.at(slog.LevelWarn)
	if len(warns) != 1 {
		t.Fatalf("%d warn lines for 20 failures in an instant, want 1: %v", len(warns), warns)
	}
	if w := warns[0]; w["msg"] != "authentication failed" || w["source"] != "192.0.2.1:1" || w["user"] != "admin" {
		t.Fatalf("warn line %v", w)
	}
	fc.now = fc.now.Add(10 * time.Second)
	g.Failed(netip.MustParseAddrPort("192.0.2.99:1"), "", "wrong")
	warns = rec.at(slog.LevelWarn)
	if len(warns) != 2 || warns[1]["failures"] != "20" || warns[1]["failures_total"] != "21" || warns[1]["source"] != "192.0.2.99:1" {
		t.Fatalf("second warn line %v; want the 20 failures since the first", warns)
	}
	if n := len(rec.at(slog.LevelDebug)); n != 21 {
		t.Fatalf("%d debug lines, want one per failure", n)
	}
}
