package pressure

import (
	"errors"
	"sync"
	"time"
)

// HeartbeatPeriod is the cadence of the heartbeat that admits fresh
// episodes.
const HeartbeatPeriod = 5 * time.Second

// MaxBeatEntries bounds the runtimes one Beat samples.
const MaxBeatEntries = 4096

// ErrBeatFull refuses an Add past MaxBeatEntries; ErrBeatClosed an Add
// after Close.
var (
	ErrBeatFull   = errors.New("pressure: the heartbeat samples its maximum of runtimes")
	ErrBeatClosed = errors.New("pressure: the heartbeat is closed")
)

// Beat is the process's one periodic sampling pass, for a process whose
// runtimes have no heartbeat of their own: every period it samples each
// registered runtime's carriers and hands the samples to its Monitor. It
// starts one goroutine, which Close stops and waits for; it adds no task
// per carrier.
type Beat struct {
	period time.Duration
	now    func() time.Time

	mu      sync.Mutex // guards entries, next, closed; never held during a pass's reads
	entries map[uint64]beatEntry
	next    uint64
	closed  bool

	pass      sync.Mutex // one pass at a time
	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

type beatEntry struct {
	s      Sampler
	m      *Monitor
	onHint func(Hint) // nil: none
}

// StartBeat starts a heartbeat every period (0: HeartbeatPeriod).
func StartBeat(period time.Duration) *Beat {
	if period <= 0 {
		period = HeartbeatPeriod
	}
	b := &Beat{
		period:  period,
		now:     time.Now,
		entries: make(map[uint64]beatEntry),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go b.run()
	return b
}

func (b *Beat) run() {
	defer close(b.done)
	t := time.NewTicker(b.period)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			b.Pass(b.now())
		}
	}
}

// Add registers a runtime: s its carriers, m its Monitor, onHint (may be
// nil) called from the pass with each hint m publishes. remove ends the
// registration; it is idempotent.
func (b *Beat) Add(s Sampler, m *Monitor, onHint func(Hint)) (remove func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrBeatClosed
	}
	if len(b.entries) >= MaxBeatEntries {
		return nil, ErrBeatFull
	}
	b.next++
	id := b.next
	b.entries[id] = beatEntry{s: s, m: m, onHint: onHint}
	return func() {
		b.mu.Lock()
		delete(b.entries, id)
		b.mu.Unlock()
	}, nil
}

// Pass samples every registered runtime once, at at. The ticker calls it;
// an owner with a heartbeat of its own may call it instead.
func (b *Beat) Pass(at time.Time) {
	b.pass.Lock()
	defer b.pass.Unlock()
	b.mu.Lock()
	entries := make([]beatEntry, 0, len(b.entries))
	for _, e := range b.entries {
		entries = append(entries, e)
	}
	b.mu.Unlock()
	for _, e := range entries {
		if r := e.m.Observe(at, e.s.Sample(at)...); r.Published && e.onHint != nil {
			e.onHint(r.Hint)
		}
	}
}

// Close stops the heartbeat and waits for its goroutine; later Adds fail.
func (b *Beat) Close() {
	b.closeOnce.Do(func() {
		b.mu.Lock()
		b.closed = true
		b.mu.Unlock()
		close(b.stop)
	})
	<-b.done
}
