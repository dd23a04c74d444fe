package health

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"switchyard/netx"
)

// Options configure an Engine. Zero values take the defaults.
type Options struct {
	Clock Clock // nil: the wall clock

	// TCPCheckURLs are the global TCP check URLs; the first is probed
	// with TCPCheckMethod. Empty: a raw TCP connect to each node's server
	// (Prober.TCP with url "").
	TCPCheckURLs   []string
	TCPCheckMethod string // HEAD (default) or GET
	// UDPCheckDNS are the DNS servers UDP probes query through each UDP
	// node; the first is used. Empty: no UDP probing.
	UDPCheckDNS []netx.Addr

	CheckInterval time.Duration // periodic cycle; default 30 s
	CheckTimeout  time.Duration // one probe; default 5 s
	IdleTimeout   time.Duration // sleeping groups' idle time; default 30 min

	// MaxConcurrentProbes bounds the probes in flight, every kind
	// together; default DefaultMaxConcurrentProbes.
	MaxConcurrentProbes int

	// OnDeath is called on every alive→dead transition of any of a node's
	// six states, once per transition: the node's pooled connections and
	// UDP endpoints are purged. OnChange is called on every transition of
	// a node state, and of a check_url state with the leaf it was probed
	// through (group connectivity is recomputed). Both are called with no
	// engine lock held, on the goroutine that caused the transition (a
	// probe, or the caller of a Report method); they may read the engine
	// but must not call Stop.
	OnDeath  func(id NodeID, name string)
	OnChange func(id NodeID)

	// URLTargets returns the per-group check_url probes: one (member tag,
	// URL, the member's current leaf) per member of each group with a
	// check_url. It is called again on every cycle, with no engine lock
	// held; the check_url states are replaced by what it returns.
	URLTargets func() []URLTarget

	// Observer, when set, hears every transition and every probe of a
	// node (observe.go).
	Observer Observer

	// OnScoreQUIC hears every Score QUIC evidence handshake (quicprobe.go)
	// of a Score leaf: when it started, its duration when ok. It is Score's
	// DataUdp probe quality only: the engine records no latency from it.
	// Called with no engine lock held, on the probe's goroutine; it must be
	// cheap and must not block.
	OnScoreQUIC func(id NodeID, started time.Time, rtt time.Duration, ok bool)

	Log *slog.Logger // nil: discarded
}

// URLTarget is one per-group check_url probe: URL through Node, the current
// leaf of member Member, recorded under (Member, URL).
type URLTarget struct {
	Member, URL string
	Node        NodeID
}

// Engine is the health of every registered node (AliveDialerSet): six
// states per node, latencies, failure strikes and the dial-latency EMA,
// per-group check_url states, and the runner that probes them. Selection
// reads (Alive, UDPEligible, Latency, URLAlive, URLLatency, Strikes,
// Epoch) take no lock and allocate nothing.
type Engine struct {
	clock    Clock
	log      *slog.Logger
	url      string // first TCP check URL, "" for a raw connect
	method   string
	dns      netx.Addr // first UDP check server
	udp      bool      // dns is set
	interval time.Duration
	timeout  time.Duration
	idle     time.Duration
	recovery time.Duration
	onDeath  func(NodeID, string)
	onChange func(NodeID)
	targets  func() []URLTarget
	obs      Observer
	quicURL  string // the first TCP check URL when HTTPS, "" for no QUIC probe
	onQUIC   func(NodeID, time.Time, time.Duration, bool)

	epoch atomic.Uint64
	reg   atomic.Pointer[map[NodeID]*node]
	act   atomic.Pointer[activity]
	urls  atomic.Pointer[map[urlKey]*urlEntry]
	score atomic.Pointer[map[NodeID]struct{}] // the Score leaves (SetScoreLeaves)

	ctl   sync.Mutex // serializes Sync, SyncActivity and check_url set writes
	urlMu sync.Mutex // guards replacing the check_url set; after ctl

	run runner
}

// New returns an engine with no node; Sync registers them and Start runs
// the probes. ProbeNow, Delay and the Report methods work without Start.
func New(o Options) *Engine {
	e := &Engine{
		clock:    o.Clock,
		log:      o.Log,
		method:   o.TCPCheckMethod,
		interval: o.CheckInterval,
		timeout:  o.CheckTimeout,
		idle:     o.IdleTimeout,
		onDeath:  o.OnDeath,
		onChange: o.OnChange,
		targets:  o.URLTargets,
		obs:      o.Observer,
		onQUIC:   o.OnScoreQUIC,
	}
	if e.clock == nil {
		e.clock = realClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if len(o.TCPCheckURLs) > 0 {
		e.url = o.TCPCheckURLs[0]
		if validHTTPS(e.url) {
			e.quicURL = e.url
		}
	}
	if e.method == "" {
		e.method = "HEAD"
	}
	if len(o.UDPCheckDNS) > 0 {
		e.dns, e.udp = o.UDPCheckDNS[0], true
	}
	if e.interval <= 0 {
		e.interval = DefaultCheckInterval
	}
	if e.timeout <= 0 {
		e.timeout = DefaultCheckTimeout
	}
	if e.idle <= 0 {
		e.idle = DefaultIdleTimeout
	}
	e.recovery = min(RecoveryInterval, e.interval)
	limit := o.MaxConcurrentProbes
	if limit <= 0 {
		limit = DefaultMaxConcurrentProbes
	}
	e.reg.Store(&map[NodeID]*node{})
	e.act.Store(&activity{})
	e.urls.Store(&map[urlKey]*urlEntry{})
	e.score.Store(&map[NodeID]struct{}{})
	e.run.init(limit)
	return e
}

// Sync registers nodes, the whole desired set. A new ID is registered with
// the 60 s grace; an ID kept with the same Incarnation keeps its state (its
// name, prober and UDP flag are updated); an ID with a new Incarnation
// gets a fresh state and a new grace; an ID absent from nodes is dropped
// with its histories, and results of its probes in flight are ignored.
func (e *Engine) Sync(nodes []Node) {
	e.ctl.Lock()
	defer e.ctl.Unlock()
	now := e.clock.Now()
	old := *e.reg.Load()
	next := make(map[NodeID]*node, len(nodes))
	for _, n := range nodes {
		if _, dup := next[n.ID]; dup {
			e.log.Warn(fmt.Sprintf("health: node %s registered twice; the first registration is kept", n.ID))
			continue
		}
		if x, ok := old[n.ID]; ok && x.incarnation == n.Incarnation {
			x.meta.Store(&meta{name: n.Name, prober: n.Prober, udp: n.UDP})
			next[n.ID] = x
			continue
		}
		next[n.ID] = newNode(n, now)
	}
	for id, x := range old {
		if next[id] != x {
			x.removed.Store(true)
		}
	}
	e.reg.Store(&next)
	e.epoch.Add(1)
}

func (e *Engine) node(id NodeID) *node { return (*e.reg.Load())[id] }

func (e *Engine) view(id NodeID) *view {
	if n := e.node(id); n != nil {
		return n.snap.Load()
	}
	return nil
}

// Alive reports whether state (d, f) of node id is alive. A state nothing
// ever reported on is alive; an ID not registered is not (selection must
// not trust a node health knows nothing about).
func (e *Engine) Alive(id NodeID, d Domain, f netx.Family) bool {
	v := e.view(id)
	return v != nil && int(d) < len(v.st) && v.st[d][f&1].alive
}

// HasUDPState reports whether anything ever reported on a UDP domain of
// node id in family f, distinguishing a node without UDP observations from
// one observed dead.
func (e *Engine) HasUDPState(id NodeID, f netx.Family) bool {
	v := e.view(id)
	return v != nil && (v.st[DNSUDP][f&1].observed || v.st[DataUDP][f&1].observed)
}

// UDPEligible is the UDP rule of the liveness filter for node id in family
// f: selectable while DataUdp or DnsUdp is alive, excluded when both were
// observed dead (even with TCP alive), and with no UDP state ever recorded
// it inherits TCP liveness. An ID not registered is not eligible.
func (e *Engine) UDPEligible(id NodeID, f netx.Family) bool {
	v := e.view(id)
	if v == nil {
		return false
	}
	data, dns := &v.st[DataUDP][f&1], &v.st[DNSUDP][f&1]
	if !data.observed && !dns.observed {
		return v.st[TCP][f&1].alive
	}
	return data.alive || dns.alive
}

// Latency returns the halving moving average of the real samples of state
// (d, f) of node id; ok is false when there is none. Synthetic
// placeholders are not part of it, and dial latencies never are.
func (e *Engine) Latency(id NodeID, d Domain, f netx.Family) (avg time.Duration, ok bool) {
	v := e.view(id)
	if v == nil || int(d) >= len(v.st) {
		return 0, false
	}
	c := &v.st[d][f&1]
	return c.avg, c.hasAvg
}

// Strikes returns the pending failure strikes of node id: one per two
// consecutive real dial failures and one per three consecutive slow dials.
// A node with strikes ranks below every node without.
func (e *Engine) Strikes(id NodeID) int {
	if v := e.view(id); v != nil {
		return v.strikes
	}
	return 0
}

// Epoch increments on every change any selection read could see: a
// liveness, latency or strike change, a check_url state or set change, a
// Sync. A selection cache recomputes when it moves.
func (e *Engine) Epoch() uint64 { return e.epoch.Load() }

// transition is one alive/dead change, reported once the node's lock is
// released.
type transition struct {
	n     *node
	d     Domain
	f     netx.Family
	what  change
	cause string // for a death: what killed it
}

// settle logs transitions and calls the callbacks. No lock is held.
func (e *Engine) settle(ts []transition) {
	for _, t := range ts {
		if t.n.removed.Load() {
			continue
		}
		name := t.n.name()
		if t.what == died {
			e.log.Info(fmt.Sprintf("node %s %s/%s dead after %s", name, t.d, t.f, t.cause))
			if e.onDeath != nil {
				e.onDeath(t.n.id, name)
			}
		} else {
			e.log.Info(fmt.Sprintf("node %s %s/%s alive again", name, t.d, t.f))
		}
		if e.obs != nil {
			e.obs.Transition(t.n.id, name, t.d, t.f, t.what != died)
		}
		if e.onChange != nil {
			e.onChange(t.n.id)
		}
	}
}

// mutate runs f under n's lock, publishes the node's view (moving the
// epoch when it changed), then settles the transitions f returned.
// f appends to the node's scratch buffer (so nothing escapes to the heap
// on the data path), copied to the stack before the lock is released.
func (e *Engine) mutate(n *node, f func(now time.Time, ts []transition) []transition) {
	var out [maxTransitions]transition
	n.mu.Lock()
	ts := f(e.clock.Now(), n.scratch[:0])
	k := copy(out[:], ts)
	clear(n.scratch[:])
	if n.publishLocked() {
		e.epoch.Add(1)
	}
	n.mu.Unlock()
	if k > 0 {
		e.settle(out[:k])
	}
}

// sibling is the other UDP domain.
func sibling(d Domain) Domain {
	if d == DNSUDP {
		return DataUDP
	}
	return DNSUDP
}

// killLocked applies the deaths of the states in dying (by domain) of
// family f, with the skip-death rule: a UDP domain does not die while its
// sibling is explicitly alive and not dying itself, so a blocked :53 probe
// does not purge working flows. n.mu is held.
func (e *Engine) killLocked(n *node, now time.Time, f netx.Family, dying [3]bool, cause string, ts []transition) []transition {
	for _, d := range Domains {
		if !dying[d] {
			continue
		}
		if d != TCP {
			s := sibling(d)
			if !dying[s] && n.cells[s][f].explicitlyAlive() {
				e.log.Debug(fmt.Sprintf("node %s %s/%s stays alive after %s: %s/%s is alive", n.name(), d, f, cause, s, f))
				continue
			}
		}
		n.cells[d][f].die(now)
		ts = append(ts, transition{n: n, d: d, f: f, what: died, cause: cause})
	}
	return ts
}

// familyOf returns the family a failure names, V4 when it names none.
func familyOf(err error) netx.Family {
	var fe *FamilyError
	if errors.As(err, &fe) {
		return fe.Family & 1
	}
	return netx.V4
}

// Stop ends the runner: it cancels every probe and pass, including those of
// ProbeNow, Delay and DelayMany in flight, and waits for their goroutines.
// Stop is idempotent; after it the engine probes nothing more (ProbeNow
// and Delay return at once) while its reads keep working.
func (e *Engine) Stop() { e.run.stop() }

// Start starts the runner: a cycle at once and then every CheckInterval,
// the recovery scheduler every min(5 s, CheckInterval), and the urgent
// probes (emergency, wake-up, network change). Stop ends it. Start after
// Stop, or a second Start, does nothing.
func (e *Engine) Start() { e.run.start(e) }
