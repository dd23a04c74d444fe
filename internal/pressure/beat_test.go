package pressure

import (
	"sync"
	"testing"
	"time"

	"switchyard/netx"
)

// fixed is a Sampler that returns the samples it is handed next.
type fixed struct {
	mu   sync.Mutex
	next []Sample
	n    int
}

func (f *fixed) Sample(time.Time) []Sample {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	s := f.next
	f.next = nil
	return s
}

func (f *fixed) set(s ...Sample) { f.mu.Lock(); defer f.mu.Unlock(); f.next = s }
func (f *fixed) calls() int      { f.mu.Lock(); defer f.mu.Unlock(); return f.n }

// A pass samples every registered runtime and feeds its monitor; onHint
// hears each publication; a removed runtime is no longer sampled.
func TestBeatPass(t *testing.T) {
	b := StartBeat(time.Hour) // only explicit passes
	defer b.Close()
	src, m := &fixed{}, &Monitor{}
	var hints []Hint
	remove, err := b.Add(src, m, func(h Hint) { hints = append(hints, h) })
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{at: t0}
	for range TrainingSamples {
		src.set(c.rtt(40 * ms))
		b.Pass(c.at)
	}
	for range PressureStreak {
		src.set(c.rtt(100 * ms))
		b.Pass(c.at)
	}
	if len(hints) != 1 || hints[0].Kind != KindRTT || hints[0].Family != netx.V4 {
		t.Fatalf("hints %+v", hints)
	}
	remove()
	remove()
	n := src.calls()
	b.Pass(c.at)
	if src.calls() != n {
		t.Fatal("a removed runtime was sampled")
	}
}

// The ticker drives passes on its own; Close stops it and waits, and an
// Add after Close fails.
func TestBeatTicksAndCloses(t *testing.T) {
	b := StartBeat(5 * time.Millisecond)
	src := &fixed{}
	if _, err := b.Add(src, &Monitor{}, nil); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for src.calls() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the heartbeat did not tick")
		}
		time.Sleep(time.Millisecond)
	}
	b.Close()
	b.Close()
	n := src.calls()
	time.Sleep(20 * time.Millisecond)
	if src.calls() != n {
		t.Fatal("sampled after Close")
	}
	if _, err := b.Add(src, &Monitor{}, nil); err != ErrBeatClosed {
		t.Fatalf("Add after Close: %v", err)
	}
}

// The registrations are bounded.
func TestBeatIsBounded(t *testing.T) {
	b := StartBeat(time.Hour)
	defer b.Close()
	for range MaxBeatEntries {
		if _, err := b.Add(&fixed{}, &Monitor{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.Add(&fixed{}, &Monitor{}, nil); err != ErrBeatFull {
		t.Fatalf("past the bound: %v", err)
	}
}
