package warm

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/health"
)

// The warm-up's bounds.
const (
	// PassInterval is the period of the repair pass.
	PassInterval = 10 * time.Second
	// MaxAttempts bounds the warm attempts running at once.
	MaxAttempts = 4
	// UDPDepth bounds the UDP warm set's leaves per group and family:
	// min(N, UDPDepth).
	UDPDepth = 3
	// UDPCapFactor caps the retained UDP warm set at UDPCapFactor × N.
	UDPCapFactor = 4
)

// Config is the [warmup] a manager runs with.
type Config struct {
	Preconnect  int  // startup preconnect's node count; 0: off
	UDPWarmSet  int  // N; 0: off
	SelectorPin bool // pin every Selector's TCP choice
}

// Source is what a pass reads of the running configuration. Its methods
// are called from the manager's goroutines, never under its lock.
type Source interface {
	// Nodes are the warmable proxy nodes, in configuration order.
	Nodes() []Node
	// GroupPicks are the leaves every group picks now for TCP, in group
	// order (duplicates allowed).
	GroupPicks() []health.NodeID
	// SelectorChoices are the leaves of every Selector's effective TCP
	// member, whatever their health.
	SelectorChoices() []health.NodeID
	// UDPRanked is, for every group and address family, the group's UDP
	// ranking of its eligible leaves, best first.
	UDPRanked() [][]health.NodeID
	// Begin opens the establishment one warm attempt runs under (the
	// generation's admission and deadline); end ends it.
	Begin(ctx context.Context) (actx context.Context, end func())
}

// Options are what a manager is built with.
type Options struct {
	// Clock runs the repair pass's timer (nil: the wall clock).
	Clock health.Clock
	Log   *slog.Logger // nil: discarded
}

// Manager runs the warm-up over the runtimes of the running nodes.
type Manager struct {
	clock health.Clock
	log   *slog.Logger

	ctx    context.Context // attempts; cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loop and the attempts
	wake   chan struct{}  // cap 1: a pass is due
	sem    chan struct{}  // MaxAttempts attempt permits

	mu       sync.Mutex // guards what follows; never held across I/O or a Source call
	src      Source
	cfg      Config
	runtimes map[key]*Runtime
	started  bool
	closed   bool

	pub atomic.Pointer[[]*Runtime] // the runtimes in configuration order, for readers
	// passes counts the passes done, inflight the attempts under way.
	passes   atomic.Uint64
	inflight atomic.Int32
}

// New returns a manager with no node; it starts nothing.
func New(o Options) *Manager {
	m := &Manager{clock: o.Clock, log: o.Log, wake: make(chan struct{}, 1), sem: make(chan struct{}, MaxAttempts), runtimes: map[key]*Runtime{}}
	if m.clock == nil {
		m.clock = wallClock{}
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// Update hands the manager a generation: its nodes and its [warmup]. A
// node whose identity and version it knows keeps its runtime; a new one
// gets a fresh runtime; a runtime whose node is gone or changed is cooled.
// The pass runs at once.
func (m *Manager) Update(src Source, cfg Config) {
	nodes := src.Nodes()
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	next := make(map[key]*Runtime, len(nodes))
	list := make([]*Runtime, 0, len(nodes))
	for _, n := range nodes {
		k := n.key()
		if _, dup := next[k]; dup || n.Out == nil {
			continue
		}
		r := m.runtimes[k]
		if r == nil {
			r = &Runtime{node: n}
		}
		next[k] = r
		list = append(list, r)
	}
	var dropped []*Runtime
	for k, r := range m.runtimes {
		if next[k] == nil {
			dropped = append(dropped, r)
		}
	}
	m.runtimes, m.src, m.cfg = next, src, cfg
	m.pub.Store(&list)
	m.mu.Unlock()
	for _, r := range dropped {
		r.setOwners(0)
		r.cooled.Store(true)
		r.node.Out.Cool()
	}
	m.Wake()
}

// Start runs the startup preconnect with the first pass, then a pass
// every PassInterval and at every Wake, until Close. Call it once the
// inbounds are bound.
func (m *Manager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started || m.closed {
		return
	}
	m.started = true
	m.wg.Add(1)
	go m.loop()
}

// Wake has the pass run now (a group's effective member changed).
func (m *Manager) Wake() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Close stops the passes and the attempts under way and waits for them.
// It cools nothing: the outbounds' own Close releases what they keep.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// States reads every runtime of the running nodes, in configuration
// order. It takes no lock a pass or an attempt holds.
func (m *Manager) States() []State {
	p := m.pub.Load()
	if p == nil {
		return nil
	}
	out := make([]State, len(*p))
	for i, r := range *p {
		out[i] = r.State()
	}
	return out
}

// State reads the runtime of the node named name.
func (m *Manager) State(name string) (State, bool) {
	if p := m.pub.Load(); p != nil {
		for _, r := range *p {
			if r.node.Name == name {
				return r.State(), true
			}
		}
	}
	return State{}, false
}

// Runtime is the runtime of node id at version, or nil.
func (m *Manager) Runtime(id health.NodeID, version uint32) *Runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runtimes[key{id, version}]
}

func (m *Manager) loop() {
	defer m.wg.Done()
	first := true
	for {
		select {
		case <-m.wake:
		default:
		}
		m.pass(first)
		m.passes.Add(1)
		first = false
		stop := m.clock.AfterFunc(PassInterval, m.Wake)
		select {
		case <-m.wake:
			stop()
		case <-m.ctx.Done():
			stop()
			return
		}
	}
}

// wallClock is the real clock.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }
func (wallClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}
