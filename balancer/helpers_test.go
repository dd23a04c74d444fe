package balancer_test

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"switchyard/balancer"
	"switchyard/netx"
	"switchyard/plane"
)

func id(tag string) plane.OutboundID { return plane.OutboundID{Tag: tag, Version: 1} }

// members returns one member per tag at version 1, each probed at probe.
func members(probe netx.Addr, tags ...string) []balancer.Member {
	ms := make([]balancer.Member, len(tags))
	for i, tag := range tags {
		ms[i] = balancer.Member{Target: plane.NewTarget(id(tag), nil), Probe: probe}
	}
	return ms
}

var somewhere = netx.Addr{IP: netip.MustParseAddr("192.0.2.1"), Port: 443}

func newBalancer(t *testing.T, s balancer.Strategy, tags ...string) *balancer.Balancer {
	t.Helper()
	b, err := balancer.New("pool", members(somewhere, tags...), s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// picks returns the tags of n selections.
func picks(n int, sel func() *plane.Target) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = sel().ID().Tag
	}
	return out
}

// logs records what a balancer logs.
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

// count returns how many info records have exactly msg.
func (l *logs) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if r.Message == msg && r.Level == slog.LevelInfo {
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

// wait waits until msg was logged n times at info level.
func (l *logs) wait(t *testing.T, msg string, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.count(msg) < n {
		if time.Now().After(deadline) {
			t.Fatalf("never logged %q %d times; logged:\n%s", msg, n, l)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func slogOf(l *logs) *slog.Logger { return slog.New(l) }
